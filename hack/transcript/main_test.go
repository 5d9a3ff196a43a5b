package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestTranscriptStampsLinesFromTheMarkerOn(t *testing.T) {
	in := strings.Join([]string{
		"starting the stack",
		"== demo: GitLab",
		"",
		"# Install.",
		"$ oc helm -n demo install gitlab local/gitlab --wait",
		"waiting\r\x1b[2K[####------] 4/10 waiting",
		"$ oc helm -n demo list",
		"NAME  STATUS",
	}, "\n")
	t0 := time.Date(2026, 12, 3, 6, 0, 0, 0, time.UTC)
	tick := 0
	now := func() time.Time { tick++; return t0.Add(time.Duration(tick) * 30 * time.Second) }
	out := filepath.Join(t.TempDir(), "demo.md")
	var echo strings.Builder
	if err := run(strings.NewReader(in), &echo, out, "make demo", now); err != nil {
		t.Fatal(err)
	}
	if echo.String() != in+"\n" {
		t.Errorf("echo %q", echo.String())
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	for _, want := range []string{
		"| 1:00 | `Install.` |",
		"| 1:30 | `$ oc helm -n demo install gitlab local/gitlab --wait` |",
		" 2:00  [####------] 4/10 waiting\n",
		" 3:00  NAME  STATUS\n",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("transcript lacks %q:\n%s", want, doc)
		}
	}
	if strings.Contains(doc, "starting the stack") || strings.Contains(doc, "\x1b") {
		t.Errorf("transcript has the stack's start or terminal escapes:\n%s", doc)
	}
	if err := run(strings.NewReader("no marker\n"), &echo, out, "make demo", now); err == nil {
		t.Errorf("no error without the demo's marker")
	}
}
