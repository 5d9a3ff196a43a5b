package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/async-helm/async-helm/pkg/api"
)

// lifecycleSubmit accepts an uninstall (the release then reads uninstalling, then 404) and a
// rollback (pending-rollback, then deployed); it records the requests.
func lifecycleSubmit(t *testing.T, deletes *rawQuery, rollback *api.RollbackRequest) *httptest.Server {
	var reads atomic.Int32
	mux := http.NewServeMux()
	mux.HandleFunc("DELETE "+api.PathAsync, func(w http.ResponseWriter, r *http.Request) {
		*deletes = rawQuery(r.URL.RawQuery)
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("PATCH "+api.PathAsync, func(w http.ResponseWriter, r *http.Request) {
		_ = json.NewDecoder(r.Body).Decode(rollback)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v3", Namespace: "team",
			UID: "0b6c6c55-0000-4000-8000-000000000003", Labels: map[string]string{"name": "web", "status": "pending-rollback", "version": "3"}}})
	})
	mux.HandleFunc("GET "+api.PathRelease, func(w http.ResponseWriter, r *http.Request) {
		n := reads.Add(1)
		switch {
		case r.URL.Query().Get("name") == "gone" && n > 1:
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "release: not found: team/gone"})
		case r.URL.Query().Get("name") == "gone":
			_ = json.NewEncoder(w).Encode(&helmrelease.Release{Name: "gone", Version: 2, Info: &helmrelease.Info{Status: helmrelease.StatusUninstalling}})
		case r.URL.Query().Get("name") == "stuck":
			_ = json.NewEncoder(w).Encode(&helmrelease.Release{Name: "stuck", Version: 2,
				Info: &helmrelease.Info{Status: helmrelease.StatusFailed, Description: "pre-delete hook failed"}})
		default:
			_ = json.NewEncoder(w).Encode(&helmrelease.Release{Name: "web", Version: 3, Info: &helmrelease.Info{Status: helmrelease.StatusDeployed}})
		}
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

type rawQuery string

func runLifecycle(t *testing.T, srv *httptest.Server, args string) (string, error) {
	t.Helper()
	var out bytes.Buffer
	root := NewRootCmd(genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out})
	root.SetArgs(append(strings.Fields(args), "--server", srv.URL, "-n", "team", "--kubeconfig", os.DevNull))
	err := root.Execute()
	return out.String(), err
}

func TestUninstallAndRollbackCommands(t *testing.T) {
	var q rawQuery
	var rb api.RollbackRequest
	srv := lifecycleSubmit(t, &q, &rb)

	out, err := runLifecycle(t, srv, "uninstall gone --wait --version 2")
	if err != nil || !strings.Contains(out, "gone: uninstalling, revision 2") || !strings.Contains(out, "gone: uninstalled") {
		t.Errorf("uninstall --wait: %v\n%s", err, out)
	}
	if q != "name=gone&ns=team&version=2" {
		t.Errorf("uninstall query %q", q)
	}
	if _, err := runLifecycle(t, srv, "uninstall gone --no-hooks"); err != nil || q != "name=gone&no_hooks=true&ns=team" {
		t.Errorf("uninstall --no-hooks: %v, query %q", err, q)
	}
	// An uninstall that failed exits non-zero with the reason.
	out, err = runLifecycle(t, srv, "uninstall stuck --wait")
	if err == nil || !strings.Contains(err.Error(), "pre-delete hook failed") {
		t.Errorf("failed uninstall --wait: %v\n%s", err, out)
	}

	out, err = runLifecycle(t, srv, "rollback web 1 --wait --timeout 2m")
	if err != nil || !strings.Contains(out, "STATUS: pending-rollback") || !strings.Contains(out, "REVISION: 3") ||
		!strings.Contains(out, "web: deployed, revision 3") {
		t.Errorf("rollback --wait: %v\n%s", err, out)
	}
	if rb.Name != "web" || rb.Namespace != "team" || rb.Version != 1 || rb.Timeout != (2*time.Minute).String() || !rb.Wait {
		t.Errorf("rollback request %+v", rb)
	}
	if _, err := runLifecycle(t, srv, "rollback web x"); err == nil {
		t.Error("rollback to revision x was sent")
	}
}
