package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/diff"
)

const diffHas = `---
# Source: tiny/templates/all.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
data:
  message: "hello"
  other: "same"
---
# Source: tiny/templates/all.yaml
apiVersion: batch/v1
kind: Job
metadata:
  name: web-migrate-1
`

const diffWould = `---
# Source: tiny/templates/all.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
data:
  message: "changed"
  other: "same"
---
# Source: tiny/templates/secret.yaml
apiVersion: v1
kind: Secret
metadata:
  name: web-db
data:
  password: aHVudGVyMg==
`

// diffSubmit answers POST /api/helm/release/diff as submit would for a release "web" of
// namespace team (diffHas against diffWould), "same" (no changes) and nothing else (404);
// it keeps the last request.
func diffSubmit(t *testing.T, last *api.DiffRequest) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+api.PathDiff, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(last)
		out := api.Diff{Namespace: last.Namespace, Name: last.Name, Action: last.Action, From: 1, To: 2, Changes: []diff.Change{}}
		switch last.Name {
		case "web":
			c, err := diff.Compute(t.Context(), diffHas, diffWould, last.Namespace, diff.Options{Context: last.ContextLines()})
			if err != nil {
				t.Error(err)
			}
			out.Changes = c
		case "same":
		default:
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "release: not found: team/" + last.Name})
			return
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// runDiff runs oc-helm with args against srv and returns its output and error.
func runOcHelm(srv *httptest.Server, args string) (string, error) {
	var out bytes.Buffer
	root := NewRootCmd(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	root.SetArgs(append(strings.Fields(args), "--server", srv.URL, "-n", "team", "--kubeconfig", os.DevNull))
	err := root.Execute()
	return out.String(), err
}

// The text is helm-diff's, the JSON and YAML helm-diff's array of changes with each one's
// unified diff; a Secret's value never shows.
func TestDiffOutput(t *testing.T) {
	var last api.DiffRequest
	srv := diffSubmit(t, &last)
	for _, tc := range []struct{ name, args, golden string }{
		{"text", "diff upgrade web https://charts.example.com/tiny-0.2.0.tgz", "diff-upgrade.txt"},
		{"context", "diff upgrade web https://charts.example.com/tiny-0.2.0.tgz --context 1", "diff-upgrade-context1.txt"},
		{"json", "diff upgrade web https://charts.example.com/tiny-0.2.0.tgz -o json", "diff-upgrade.json"},
		{"yaml", "diff upgrade web https://charts.example.com/tiny-0.2.0.tgz -o yaml", "diff-upgrade.yaml"},
		{"no changes", "diff upgrade same", "diff-none.txt"},
		{"no changes as json", "diff upgrade same -o json", "diff-none.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, err := runOcHelm(srv, tc.args)
			if err != nil {
				t.Fatal(err)
			}
			if strings.Contains(out, "aHVudGVyMg") {
				t.Errorf("the Secret's value shows:\n%s", out)
			}
			assertGolden(t, []byte(out), filepath.Join("testdata", tc.golden))
		})
	}
}

// The flags say what upgrade's say: chart, version, values, values-from, reuse; --context,
// --include-crds and the action go along.
func TestDiffSendsTheUpgradeItPreviews(t *testing.T) {
	var last api.DiffRequest
	srv := diffSubmit(t, &last)
	values := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(values, []byte("replicas: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := runOcHelm(srv, "diff upgrade web openshift/tiny --version 0.2.0 -f "+values+
		" --set image=web:2 --values-from secret/db:pw.yaml --reuse-values -C 2 --include-crds -o json"); err != nil {
		t.Fatal(err)
	}
	want := api.DiffRequest{Action: "upgrade", ReleaseRequest: api.ReleaseRequest{Name: "web", Namespace: "team",
		IndexEntry: "tiny--openshift", ChartVersion: "0.2.0", Values: map[string]any{"replicas": float64(3), "image": "web:2"},
		ReuseValues: true}, IncludeCRDs: true}
	if last.ContextLines() != 2 || len(last.ValuesFrom) != 1 || last.ValuesFrom[0].Name != "db" || last.ValuesFrom[0].Key != "pw.yaml" {
		t.Errorf("context %d, values_from %+v", last.ContextLines(), last.ValuesFrom)
	}
	last.Context, last.ValuesFrom = nil, nil
	if !reflect.DeepEqual(last, want) {
		t.Errorf("request %+v\nwant %+v", last, want)
	}
	if _, err := runOcHelm(srv, "diff rollback web 3 --context 2"); err != nil || last.Action != "rollback" || last.Version != 3 {
		t.Errorf("rollback: %v, request %+v", err, last)
	}
	if last.ContextLines() != -1 {
		t.Errorf("the text asked for %d lines of context, want whole objects (the context is applied as helm-diff applies it)", last.ContextLines())
	}
}

// --detailed-exitcode: changes are exit status 2 (after the diff), none 0; errors stay errors.
func TestDiffDetailedExitCode(t *testing.T) {
	var last api.DiffRequest
	srv := diffSubmit(t, &last)
	out, err := runOcHelm(srv, "diff upgrade web --detailed-exitcode")
	var exit *ExitError
	if !errors.As(err, &exit) || exit.Code != 2 || !strings.Contains(out, "has changed") {
		t.Errorf("changes: %v, output %q", err, out)
	}
	if _, err := runOcHelm(srv, "diff upgrade same --detailed-exitcode"); err != nil {
		t.Errorf("no changes: %v", err)
	}
	if _, err := runOcHelm(srv, "diff upgrade ghost --detailed-exitcode"); err == nil || errors.As(err, &exit) || !strings.Contains(err.Error(), "not found") {
		t.Errorf("no release: %v", err)
	}
	if _, err := runOcHelm(srv, "diff upgrade web -o table"); err == nil || !strings.Contains(err.Error(), "want diff, json or yaml") {
		t.Errorf("bad output: %v", err)
	}
}
