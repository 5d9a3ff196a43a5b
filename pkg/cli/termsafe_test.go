package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/api"
)

// hostileRelease is a record whose tenant wrote terminal control sequences in every field
// oc helm prints: cursor up + erase line (hides the row above), OSC 52 (writes the reader's
// clipboard), a C1 CSI, a raw 0x9b byte and a newline that would start a forged row.
func hostileRelease() *helmrelease.Release {
	seq := "\x1b[1A\x1b[2K\r\x1b]52;c;Y3VybCBldmlsIHwgc2g=\a\u009b2J\x9b"
	return &helmrelease.Release{Name: "web", Namespace: "team-b", Version: 1,
		Info: &helmrelease.Info{Status: helmrelease.StatusFailed, Description: "boom" + seq + "\nteam-a db 9 deployed",
			Notes: "line one\n\tindented\r\nok" + seq},
		Manifest: "kind: ConfigMap\n# " + seq + "\n",
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "0.1.0",
			AppVersion: "1.0" + seq + "\nteam-a db 7 deployed"}}}
}

func hostileSubmit(t *testing.T) *httptest.Server {
	victim := &helmrelease.Release{Name: "db", Namespace: "team-a", Version: 7,
		Info:  &helmrelease.Info{Status: helmrelease.StatusFailed},
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "postgres", Version: "1.0.0", AppVersion: "16"}}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.PathList, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode([]api.Release{{Release: victim}, {Release: hostileRelease()}})
	})
	mux.HandleFunc("GET "+api.PathRelease, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode(api.Release{Release: hostileRelease()})
	})
	mux.HandleFunc("GET "+api.PathHistory, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode([]*helmrelease.Release{hostileRelease()})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// Every text and table output of a tenant's record reaches the terminal with its controls
// escaped; tables and one-line fields keep one row a record; notes and manifests keep
// their lines and tabs; json still carries the record's text exactly.
func TestTenantTextReachesTheTerminalEscaped(t *testing.T) {
	srv := hostileSubmit(t)
	for _, args := range [][]string{
		{"list"}, {"history", "web"}, {"status", "web"}, {"status", "web", "--watch"},
		{"get", "notes", "web"}, {"get", "manifest", "web"}, {"get", "all", "web"},
	} {
		var out bytes.Buffer
		_ = runCmd(t, srv, &out, args...)
		got := out.String()
		if i := strings.IndexFunc(got, func(r rune) bool {
			return r != '\n' && r != '\t' && r != '\r' && (r < 0x20 || (r >= 0x7f && r <= 0x9f))
		}); i >= 0 || strings.Contains(strings.ReplaceAll(got, "\r\n", "\n"), "\r") {
			t.Errorf("oc helm %s wrote a control character at %d: %q", strings.Join(args, " "), i, got)
		}
		// A table keeps one row a record. status prints the description on lines of its
		// own, as helm does (Helm's errors list their causes so), with controls escaped.
		for _, l := range strings.Split(got, "\n") {
			if strings.HasPrefix(l, "team-a db") && (args[0] != "status" || !strings.HasPrefix(l, "team-a db 9")) {
				t.Errorf("oc helm %s: the record forged a row of its own: %q", strings.Join(args, " "), got)
			}
		}
		if !strings.Contains(got, `\x1b[1A`) && args[0] != "get" {
			t.Errorf("oc helm %s: the escaped sequence is not shown: %q", strings.Join(args, " "), got)
		}
		t.Logf("oc helm %s: %q", strings.Join(args, " "), got)
	}
	var out bytes.Buffer
	if err := runCmd(t, srv, &out, "get", "notes", "web"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "line one\n\tindented\r\nok\\x1b[1A") {
		t.Errorf("get notes: lines, tabs and CRLF should stay: %q", out.String())
	}
	out.Reset()
	if err := runCmd(t, srv, &out, "status", "web", "-o", "json"); err != nil {
		t.Fatal(err)
	}
	var back api.Release
	if err := json.Unmarshal(out.Bytes(), &back); err != nil || back.Info == nil || !strings.HasPrefix(back.Info.Notes, "line one\n\tindented\r\nok\x1b[1A\x1b[2K\r\x1b]52;") {
		t.Errorf("status -o json should carry the notes exactly (json escapes them): %v %q", err, out.String())
	}
}

func TestEscapeControls(t *testing.T) {
	for _, tc := range []struct{ in, line, text string }{
		{"plain ünïcode ⠋", "plain ünïcode ⠋", "plain ünïcode ⠋"},
		{"a\x1b[2Kb", `a\x1b[2Kb`, `a\x1b[2Kb`},
		{"a\nb\tc\r\nd\re", `a\nb\tc\r\nd\re`, "a\nb\tc\r\nd\\re"},
		{"\u009b\u0085\x7f\x9b\x00", `\u009b\u0085\x7f\x9b\x00`, `\u009b\u0085\x7f\x9b\x00`},
	} {
		if got := escapeLine(tc.in); got != tc.line {
			t.Errorf("escapeLine(%q) = %q, want %q", tc.in, got, tc.line)
		}
		if got := escapeText(tc.in); got != tc.text {
			t.Errorf("escapeText(%q) = %q, want %q", tc.in, got, tc.text)
		}
	}
}
