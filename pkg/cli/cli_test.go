package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/async-helm/async-helm/pkg/api"
)

var update = flag.Bool("update", false, "rewrite the golden files")

// fakeSubmit answers with fixed releases: the output format is what these tests check;
// the e2e package runs the real binary against the real submit.
func fakeSubmit(t *testing.T) *httptest.Server {
	at := helmtime.Time{Time: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}
	rel := func(name string, v int, st helmrelease.Status) *helmrelease.Release {
		return &helmrelease.Release{Name: name, Namespace: "team", Version: v,
			Info:  &helmrelease.Info{Status: st, LastDeployed: at, Description: "Install complete"},
			Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "0.1.0", AppVersion: "1.0"}}}
	}
	full := func(v int, st helmrelease.Status) *helmrelease.Release {
		r := rel("web", v, st)
		r.Chart.Values = map[string]any{"message": "hello", "replicas": 1}
		r.Config = map[string]any{"message": "v" + strconv.Itoa(v)}
		r.Manifest = "---\n# Source: tiny/templates/all.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\ndata:\n  message: \"v" + strconv.Itoa(v) + "\""
		r.Info.Notes = "Thank you for installing tiny.\n"
		r.Hooks = []*helmrelease.Hook{
			{Name: "web-post", Path: "tiny/templates/hook.yaml", Manifest: "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: web-post",
				Events: []helmrelease.HookEvent{helmrelease.HookPostInstall}},
			{Name: "web-test", Path: "tiny/templates/test.yaml", Manifest: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web-test",
				Events:  []helmrelease.HookEvent{helmrelease.HookTest},
				LastRun: helmrelease.HookExecution{StartedAt: at, CompletedAt: at.Add(3 * time.Second), Phase: helmrelease.HookPhaseSucceeded}},
		}
		return r
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.PathList, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode([]*helmrelease.Release{rel("web", 2, helmrelease.StatusDeployed), rel("db", 1, helmrelease.StatusPendingInstall)})
	})
	mux.HandleFunc("GET "+api.PathHistory, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("name") != "web" {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "release: not found: team/" + r.URL.Query().Get("name")})
			return
		}
		_ = json.NewEncoder(w).Encode([]*helmrelease.Release{full(1, helmrelease.StatusSuperseded), full(2, helmrelease.StatusDeployed)})
	})
	mux.HandleFunc("POST "+api.PathTemplate, func(w http.ResponseWriter, r *http.Request) {
		var req api.ReleaseRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		w.Header().Set("Content-Type", "text/yaml")
		_, _ = fmt.Fprintf(w, "---\n# Source: tiny/crds/widget.yaml\nkind: CustomResourceDefinition\n---\n# Source: tiny/templates/all.yaml\n"+
			"kind: ConfigMap\nmetadata:\n  name: %s-config\n  namespace: %s\ndata:\n  message: %q\n---\n# Source: tiny/templates/hook.yaml\nkind: Job\n",
			req.Name, req.Namespace, fmt.Sprint(req.Values["message"]))
	})
	mux.HandleFunc("GET "+api.PathRelease, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("name") != "web" {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "release: not found: team/" + r.URL.Query().Get("name")})
			return
		}
		_ = json.NewEncoder(w).Encode(full(2, helmrelease.StatusDeployed))
	})
	mux.HandleFunc("POST "+api.PathAsync, func(w http.ResponseWriter, r *http.Request) {
		var req api.ReleaseRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.Name == "taken" {
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "release name is in use: an operation is already pending on the release: revision 1 is pending-install"})
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1." + req.Name + ".v1", Namespace: req.Namespace,
			UID: "0b6c6c55-0000-4000-8000-000000000001", Labels: map[string]string{"name": req.Name, "status": "pending-install", "version": "1"}}})
	})
	mux.HandleFunc("PUT "+api.PathAsync, func(w http.ResponseWriter, r *http.Request) {
		var req api.ReleaseRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		if req.Name != "web" {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "release: not found: team/" + req.Name + " has no revisions to upgrade"})
			return
		}
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v3", Namespace: req.Namespace,
			UID: "0b6c6c55-0000-4000-8000-000000000003", Labels: map[string]string{"name": "web", "status": "pending-upgrade", "version": "3"}}})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// upgrade --install, as helm's: an upgrade of a release with no revisions installs it.
func TestUpgradeInstall(t *testing.T) {
	runTestCmd(t, []cmdTestCase{
		{name: "missing release installed", cmd: "upgrade --install ghost https://charts.example.com/tiny-0.1.0.tgz", golden: "upgrade-install-missing.txt"},
		{name: "existing release upgraded", cmd: "upgrade -i web https://charts.example.com/tiny-0.1.0.tgz", golden: "upgrade-install-existing.txt"},
		{name: "without --install a missing release is an error", cmd: "upgrade ghost https://charts.example.com/tiny-0.1.0.tgz", golden: "upgrade-missing.txt", wantErr: true},
		{name: "--install needs a chart", cmd: "upgrade -i ghost", golden: "upgrade-install-nochart.txt", wantErr: true},
	})
}

type cmdTestCase struct {
	name    string
	cmd     string
	golden  string
	wantErr bool
}

func runTestCmd(t *testing.T, tests []cmdTestCase) {
	srv := fakeSubmit(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			root := NewRootCmd(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
			root.SetArgs(append(strings.Fields(tt.cmd), "--server", srv.URL, "-n", "team", "--kubeconfig", os.DevNull))
			err := root.Execute()
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				out.WriteString("Error: " + err.Error() + "\n")
			}
			assertGolden(t, out.Bytes(), filepath.Join("testdata", tt.golden))
		})
	}
}

func assertGolden(t *testing.T, got []byte, path string) {
	t.Helper()
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./pkg/cli -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s:\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

func TestOutputFormats(t *testing.T) {
	runTestCmd(t, []cmdTestCase{
		{name: "list table", cmd: "list", golden: "list.txt"},
		{name: "list json", cmd: "list -o json", golden: "list.json"},
		{name: "list yaml", cmd: "list -o yaml", golden: "list.yaml"},
		{name: "history table", cmd: "history web", golden: "history.txt"},
		{name: "status table", cmd: "status web", golden: "status.txt"},
		{name: "status yaml", cmd: "status web -o yaml", golden: "status.yaml"},
		{name: "install table", cmd: "install web https://charts.example.com/tiny-0.1.0.tgz", golden: "install.txt"},
		{name: "install json", cmd: "install web https://charts.example.com/tiny-0.1.0.tgz -o json", golden: "install.json"},
		{name: "install conflict", cmd: "install taken https://charts.example.com/tiny-0.1.0.tgz", golden: "install-conflict.txt", wantErr: true},
		{name: "status missing", cmd: "status ghost", golden: "status-missing.txt", wantErr: true},
		{name: "bad output", cmd: "list -o xml", golden: "bad-output.txt", wantErr: true},
	})
}

// list, status and history with helm's flags.
func TestReadFlags(t *testing.T) {
	runTestCmd(t, []cmdTestCase{
		{name: "list -q", cmd: "list -q", golden: "list-short.txt"},
		{name: "list -q json", cmd: "list -q -o json", golden: "list-short.json"},
		{name: "list --deployed", cmd: "list --deployed", golden: "list-deployed.txt"},
		{name: "list --pending --no-headers", cmd: "list --pending --no-headers", golden: "list-pending.txt"},
		{name: "list --filter -r --time-format", cmd: "list --filter ^w|^d -r --time-format 2006-01-02", golden: "list-filter.txt"},
		{name: "list --max --offset", cmd: "list --max 1 --offset 1", golden: "list-window.txt"},
		{name: "status json", cmd: "status web -o json", golden: "status.json"},
		{name: "status --revision", cmd: "status web --revision 1", golden: "status-rev1.txt"},
		{name: "status --show-desc", cmd: "status web --show-desc", golden: "status.txt"},
		{name: "history --max", cmd: "history web --max 1", golden: "history-max.txt"},
		{name: "history json", cmd: "history web -o json", golden: "history.json"},
		{name: "history of nothing", cmd: "history ghost", golden: "history-missing.txt", wantErr: true},
	})
}

// Bad input is refused in helm's words, with an error (exit 1).
func TestHelmErrors(t *testing.T) {
	runTestCmd(t, []cmdTestCase{
		{name: "status without a name", cmd: "status", golden: "err-status-noargs.txt", wantErr: true},
		{name: "get values with two names", cmd: "get values web db", golden: "err-get-twoargs.txt", wantErr: true},
		{name: "list with an argument", cmd: "list web", golden: "err-list-arg.txt", wantErr: true},
		{name: "upgrade with three", cmd: "upgrade web a b", golden: "err-upgrade-threeargs.txt", wantErr: true},
		{name: "an output format helm does not know", cmd: "status web -o wide", golden: "err-output.txt", wantErr: true},
		{name: "a filter that is not a regular expression", cmd: "list --filter (", golden: "err-filter.txt", wantErr: true},
		{name: "an unknown flag", cmd: "list --bogus", golden: "err-flag.txt", wantErr: true},
		{name: "a revision that is not a number", cmd: "status web --revision x", golden: "err-revision.txt", wantErr: true},
	})
}

func TestChartRef(t *testing.T) {
	for in, want := range map[string][2]string{
		"https://x/tiny-1.tgz":    {"https://x/tiny-1.tgz", ""},
		"oci://r.example.com/c/t": {"oci://r.example.com/c/t", ""},
		"openshift/tiny":          {"", "tiny--openshift"},
	} {
		u, e := chartRef(in)
		if u != want[0] || e != want[1] {
			t.Errorf("chartRef(%q) = %q, %q; want %q, %q", in, u, e, want[0], want[1])
		}
	}
}
