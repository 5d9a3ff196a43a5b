package helmexec

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	action4 "helm.sh/helm/v4/pkg/action"
	kube4 "helm.sh/helm/v4/pkg/kube"
	"k8s.io/client-go/rest"
)

// mallory's namespace: 150 Secrets of 1 MiB beside the release's one small Secret, served as
// the API server would (discovery, lists, gets, watches that stay open); sent counts the bytes.
func malloryServer(t *testing.T, sent *atomic.Int64) *httptest.Server {
	t.Helper()
	secret := func(name string, size int) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Secret",
			"metadata": map[string]any{"name": name, "namespace": "mallory", "resourceVersion": "1", "uid": "u-" + name},
			"data":     map[string]any{"blob": strings.Repeat("QUFB", size/4)}}
	}
	write := func(w http.ResponseWriter, v any) {
		b, _ := json.Marshal(v)
		sent.Add(int64(len(b)))
		_, _ = w.Write(b)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch p, q := r.URL.Path, r.URL.Query(); {
		case q.Get("sendInitialEvents") == "true":
			http.Error(w, "watch-list is not served here", http.StatusBadRequest)
		case q.Get("watch") == "true" || q.Get("watch") == "1":
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		case p == "/version":
			write(w, map[string]any{"major": "1", "minor": "33", "gitVersion": "v1.33.0"})
		case p == "/api":
			write(w, map[string]any{"kind": "APIVersions", "versions": []string{"v1"}})
		case p == "/apis":
			write(w, map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": []any{}})
		case p == "/api/v1":
			write(w, map[string]any{"kind": "APIResourceList", "groupVersion": "v1", "resources": []any{
				map[string]any{"name": "secrets", "namespaced": true, "kind": "Secret", "verbs": []string{"get", "list", "watch"}}}})
		case p == "/api/v1/namespaces/mallory/secrets/mine":
			write(w, secret("mine", 16))
		case p == "/api/v1/namespaces/mallory/secrets":
			items := []any{secret("mine", 16)}
			for i := range 150 {
				items = append(items, secret(fmt.Sprint("big-", i), 1<<20))
			}
			write(w, map[string]any{"apiVersion": "v1", "kind": "SecretList", "metadata": map[string]any{"resourceVersion": "1"}, "items": items})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// Review 7, K10: a v4 wait (and a hook's) on one small Secret in a namespace holding 150
// Secrets of 1 MiB read them all, by Helm v4's watcher's namespace-wide informer, and held them
// for the wait. The engine's waiter reads the waited object by name.
func TestAV4WaitReadsOnlyTheWaitedObjects(t *testing.T) {
	var sent atomic.Int64
	srv := malloryServer(t, &sent)
	f, err := NewFactory(&rest.Config{Host: srv.URL}, WithEngine(EngineV4))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.renders.Close)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cfg, err := f.configurationV4(ctx, "mallory", nil)
	if err != nil {
		t.Fatal(err)
	}
	rl, err := cfg.KubeClient.Build(strings.NewReader("apiVersion: v1\nkind: Secret\nmetadata:\n  name: mine\n  namespace: mallory\n"), false)
	if err != nil {
		t.Fatal(err)
	}
	for _, ws := range []kube4.WaitStrategy{kube4.StatusWatcherStrategy, kube4.HookOnlyStrategy} {
		w, err := cfg.KubeClient.GetWaiter(ws)
		if err != nil {
			t.Fatal(err)
		}
		before := sent.Load()
		wait := w.Wait
		if ws == kube4.HookOnlyStrategy {
			wait = w.WatchUntilReady
		}
		if err := wait(rl, 20*time.Second); err != nil {
			t.Errorf("%s: %v", ws, err)
		}
		if read := sent.Load() - before; read > 64<<10 {
			t.Errorf("%s: the wait on one small Secret read %d MiB of mallory's namespace", ws, read>>20)
		} else {
			t.Logf("%s: the wait read %d bytes", ws, read)
		}
	}
}

// configurationV4 is configureV4's Helm v4 configuration (for tests of its kube client).
func (f *Factory) configurationV4(ctx context.Context, namespace string, opts []Option) (*action4.Configuration, error) {
	cfg, _, err := f.configureV4(ctx, namespace, opts)
	return cfg, err
}
