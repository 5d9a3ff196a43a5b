package cli

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
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
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.PathList, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode([]*helmrelease.Release{rel("web", 2, helmrelease.StatusDeployed), rel("db", 1, helmrelease.StatusPendingInstall)})
	})
	mux.HandleFunc("GET "+api.PathHistory, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewEncoder(w).Encode([]*helmrelease.Release{rel("web", 1, helmrelease.StatusSuperseded), rel("web", 2, helmrelease.StatusDeployed)})
	})
	mux.HandleFunc("GET "+api.PathRelease, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("name") != "web" {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "release: not found: team/" + r.URL.Query().Get("name")})
			return
		}
		_ = json.NewEncoder(w).Encode(rel("web", 2, helmrelease.StatusDeployed))
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
