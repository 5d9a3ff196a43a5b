package events

import (
	"strings"
	"testing"
	"unicode/utf8"
)

func TestClipKeepsTheStartAndEndWithinTheBound(t *testing.T) {
	long := "start " + strings.Repeat("é", 10<<10) + " end"
	for _, tc := range []struct {
		name, text string
		limit      int
	}{
		{"empty", "", 256},
		{"short", "hook failed: boom", 256},
		{"at the bound", strings.Repeat("a", 256), 256},
		{"one over", strings.Repeat("a", 257), 256},
		{"runes cut on boundaries", long, MaxReasonBytes},
		{"runes, small bound", long, MaxChartFieldBytes},
	} {
		got := clip(tc.text, tc.limit)
		switch {
		case len(tc.text) <= tc.limit && got != tc.text:
			t.Errorf("%s: %q changed to %q", tc.name, tc.text, got)
		case len(got) > tc.limit:
			t.Errorf("%s: %d bytes, bound %d", tc.name, len(got), tc.limit)
		case !utf8.ValidString(got):
			t.Errorf("%s: cut inside a rune: %q", tc.name, got)
		case len(tc.text) > tc.limit && (!strings.HasPrefix(got, tc.text[:8]) || !strings.HasSuffix(got, tc.text[len(tc.text)-3:]) ||
			!strings.Contains(got, " bytes cut]… ") || len(got) < tc.limit-clipMarkerBytes):
			t.Errorf("%s: %q", tc.name, got)
		}
	}
}

// NewStatus bounds every text field it carries from a record; the rest is as given.
func TestNewStatusBoundsTheRecordsText(t *testing.T) {
	big := strings.Repeat("x", 1<<20)
	in := StatusChange{Namespace: "ns", Name: "web", Revision: 3, Status: "failed", RequestID: "req",
		Chart: big, ChartVersion: big, AppVersion: big, Reason: big, LogTail: big}
	e, err := NewStatus(in)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(e.Data()); n > 16<<10 {
		t.Fatalf("status event data of %d KiB", n>>10)
	}
	got, err := ParseStatus(e)
	if err != nil {
		t.Fatal(err)
	}
	if got.Namespace != "ns" || got.Name != "web" || got.Revision != 3 || got.Status != "failed" || got.RequestID != "req" {
		t.Errorf("identity changed: %+v", got)
	}
	for name, f := range map[string][2]int{"reason": {len(got.Reason), MaxReasonBytes}, "logTail": {len(got.LogTail), MaxLogTailBytes},
		"chart": {len(got.Chart), MaxChartFieldBytes}, "chartVersion": {len(got.ChartVersion), MaxChartFieldBytes},
		"appVersion": {len(got.AppVersion), MaxChartFieldBytes}} {
		if f[0] > f[1] || f[0] < f[1]-clipMarkerBytes {
			t.Errorf("%s: %d bytes, bound %d", name, f[0], f[1])
		}
	}
}
