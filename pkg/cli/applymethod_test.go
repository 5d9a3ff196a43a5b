package cli

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/api"
)

// applySubmit accepts every install, upgrade and rollback and keeps the last body's
// server_side and force_conflicts as sent.
func applySubmit(t *testing.T, last *map[string]any) *httptest.Server {
	accept := func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		*last = map[string]any{}
		_ = json.Unmarshal(raw, last)
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.1", Namespace: "team",
			Labels: map[string]string{"name": "web", "status": "pending-install", "version": "1"}}})
	}
	mux := http.NewServeMux()
	for _, m := range []string{"POST ", "PUT ", "PATCH "} {
		mux.HandleFunc(m+api.PathAsync, accept)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// --server-side and --force-conflicts (Helm v4's names) send server_side and
// force_conflicts on install, upgrade and rollback; --server-side alone is true, none
// sends nothing (client-side), and a value submit would refuse is refused before sending.
func TestApplyMethodFlags(t *testing.T) {
	var last map[string]any
	srv := applySubmit(t, &last)
	for _, tc := range []struct {
		args       string
		serverSide any
		force      any
	}{
		{"install web https://charts.example.com/tiny-0.1.0.tgz", nil, nil},
		{"install web https://charts.example.com/tiny-0.1.0.tgz --server-side", "true", nil},
		{"install web https://charts.example.com/tiny-0.1.0.tgz --server-side --force-conflicts", "true", true},
		{"upgrade web --server-side=auto", "auto", nil},
		{"upgrade web --server-side=false", "false", nil},
		{"rollback web 1 --server-side=auto --force-conflicts", "auto", true},
	} {
		t.Run(tc.args, func(t *testing.T) {
			if out, err := runOcHelm(srv, tc.args); err != nil {
				t.Fatalf("%v\n%s", err, out)
			}
			if last["server_side"] != tc.serverSide || last["force_conflicts"] != tc.force {
				t.Errorf("sent server_side %v, force_conflicts %v; want %v, %v", last["server_side"], last["force_conflicts"], tc.serverSide, tc.force)
			}
		})
	}
	last = nil
	if _, err := runOcHelm(srv, "upgrade web --server-side=maybe"); err == nil || !strings.Contains(err.Error(), "want true, false or auto") || last != nil {
		t.Errorf("--server-side=maybe: %v, sent %v", err, last)
	}
}
