package cli

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/api"
)

// --supersede is sent on upgrade and rollback; install has no such flag; without it the
// body says nothing of it.
func TestSupersedeFlag(t *testing.T) {
	bodies := map[string]map[string]any{}
	mux := http.NewServeMux()
	for _, m := range []string{http.MethodPut, http.MethodPatch} {
		mux.HandleFunc(m+" "+api.PathAsync, func(w http.ResponseWriter, r *http.Request) {
			var body map[string]any
			_ = json.NewDecoder(r.Body).Decode(&body)
			bodies[r.Method] = body
			w.WriteHeader(http.StatusCreated)
			_ = json.NewEncoder(w).Encode(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v3", Namespace: "team",
				Labels: map[string]string{"name": "web", "status": "pending-upgrade", "version": "3"}}})
		})
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	for _, tc := range []struct{ args, method string }{
		{"upgrade web --supersede", http.MethodPut},
		{"rollback web 1 --supersede", http.MethodPatch},
	} {
		if out, err := runLifecycle(t, srv, tc.args); err != nil {
			t.Fatalf("%s: %v\n%s", tc.args, err, out)
		}
		if bodies[tc.method]["supersede"] != true {
			t.Errorf("%s sent %v", tc.args, bodies[tc.method])
		}
	}
	if out, err := runLifecycle(t, srv, "upgrade web"); err != nil {
		t.Fatalf("upgrade: %v\n%s", err, out)
	}
	if _, sent := bodies[http.MethodPut]["supersede"]; sent {
		t.Errorf("upgrade without --supersede sent %v", bodies[http.MethodPut])
	}
	if out, err := runLifecycle(t, srv, "install web https://charts.example/web.tgz --supersede"); err == nil ||
		!strings.Contains(err.Error(), "unknown flag: --supersede") {
		t.Errorf("install --supersede: %v\n%s", err, out)
	}
}
