package helmexec

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	helmrelease "helm.sh/helm/v3/pkg/release"
	kubefake4 "helm.sh/helm/v4/pkg/kube/fake"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// offlineV4 is offline's factory on the v4 engine: Helm's memory driver under the same
// wrappers, Helm v4's printing kube client.
func offlineV4(t *testing.T) (*Factory, *storage.Memory, []Option) {
	t.Helper()
	f, err := NewFactory(&rest.Config{Host: "http://127.0.0.1:1"}, WithEngine(EngineV4)) // never dialled
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.renders.Close)
	mem := storage.NewMemory()
	mem.SetNamespace("ns")
	return f, mem, []Option{WithDriver(mem), WithCapabilities(chartutil.DefaultCapabilities),
		WithV4KubeClient(&kubefake4.PrintingKubeClient{Out: io.Discard})}
}

// The v4 engine adopts reservations for every verb as the v3 one does.
func TestV4EngineVerbsAdoptTheirReservations(t *testing.T) {
	f, mem, opts := offlineV4(t)
	reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
	rel, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: tiny("1.0.0"),
		Values: map[string]any{"v": "one"}, Labels: release.Labels("r1", 1, "tiny", "1.0.0")}, opts...)
	if err != nil || rel.Info.Status != helmrelease.StatusDeployed || rel.Version != 1 {
		t.Fatalf("install: %v %v", describeRel(rel), err)
	}
	reserve(t, mem, "web", 2, helmrelease.StatusPendingUpgrade)
	if rel, err = f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2, Values: map[string]any{"v": "two"},
		Labels: release.Labels("r2", 2, "tiny", "1.0.0")}, opts...); err != nil || rel.Version != 2 {
		t.Fatalf("upgrade (reused chart): %v %v", describeRel(rel), err)
	}
	reserve(t, mem, "web", 3, helmrelease.StatusPendingRollback)
	if rel, err = f.Rollback(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 3, RollbackTo: 1,
		RollbackPin: pinOf(t, mem, 1), Labels: release.Labels("r3", 3, "tiny", "1.0.0")}, opts...); err != nil || rel.Info.Status != helmrelease.StatusDeployed {
		t.Fatalf("rollback: %v %v", describeRel(rel), err)
	}
	if got := get(t, mem, "web", 3); got.Config["v"] != "one" || got.Labels[release.LabelRequestID] != "r3" {
		t.Errorf("revision 3: config %v, labels %v", got.Config, got.Labels)
	}
	if _, err := f.Uninstall(ctx(t), Request{Namespace: "ns", Name: "web", Timeout: time.Minute}, opts...); err != nil {
		t.Fatalf("uninstall: %v", err)
	}
	if left, _ := mem.Query(map[string]string{"name": "web", "owner": "helm"}); len(left) != 0 {
		t.Errorf("%d records left after the uninstall", len(left))
	}
}

func describeRel(r *helmrelease.Release) string {
	if r == nil || r.Info == nil {
		return "no release"
	}
	return string(r.Info.Status) + " " + r.Info.Description
}

// The hostile-input bounds hold under v4: Helm v4's own schema compiler never runs (a
// schema that refers to another document fetches nothing), values are checked by ours
// within its bounds, the render bound ends the action, and an undecodable record is an
// error.
func TestV4EngineKeepsTheBounds(t *testing.T) {
	t.Run("schema references", func(t *testing.T) {
		var fetched atomic.Int32
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fetched.Add(1)
			_, _ = w.Write([]byte(`{"type": "integer"}`))
		}))
		defer srv.Close()
		f, mem, opts := offlineV4(t)
		for i, schema := range []string{`{"properties": {"v": {"$ref": "` + srv.URL + `/s.json"}}}`,
			`{"$schema": "` + srv.URL + `/meta.json", "type": "object"}`,
			`{"properties": {"v": {"$ref": "file:///etc/hostname"}}}`} {
			name := []string{"url", "meta", "file"}[i]
			reserve(t, mem, name, 1, helmrelease.StatusPendingInstall)
			ch := tiny("1.0.0")
			ch.Schema = []byte(schema)
			if _, err := f.Install(ctx(t), Request{Namespace: "ns", Name: name, Revision: 1, Chart: ch}, opts...); err != nil {
				t.Errorf("%s: %v", name, err)
			}
		}
		if n := fetched.Load(); n != 0 {
			t.Errorf("the schemas' references were fetched %d times", n)
		}
		reserve(t, mem, "broken", 1, helmrelease.StatusPendingInstall)
		ch := tiny("1.0.0")
		ch.Schema = []byte(`{"properties": {"v": {"type": "integer"}}}`)
		if _, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "broken", Revision: 1, Chart: ch}, opts...); !errors.Is(err, ErrValuesInvalid) {
			t.Errorf("values the schema refuses: %v, want ErrValuesInvalid", err)
		}
	})
	t.Run("values check", func(t *testing.T) {
		f, mem, opts := offlineV4(t)
		reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
		ch := tiny("1.0.0")
		ch.Values, ch.Schema = nil, []byte(recursiveSchema)
		if _, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: ch, Values: nested(17),
			RenderTimeout: 2 * time.Second}, opts...); !errors.Is(err, ErrValuesUnchecked) {
			t.Errorf("install: %v, want %v", err, ErrValuesUnchecked)
		}
	})
	t.Run("render bound", func(t *testing.T) {
		f, mem, opts := offlineV4(t)
		orphans := &Orphans{}
		opts = append(opts, WithFence(&Fence{Orphans: orphans}))
		reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
		_, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: slowChart(),
			Labels: release.Labels("r1", 1, "tiny", "1.0.0"), RenderTimeout: 100 * time.Millisecond}, opts...)
		if !errors.Is(err, ErrRenderTimeout) {
			t.Fatalf("install = %v, want ErrRenderTimeout", err)
		}
		if n := orphans.Count(); n != 0 {
			t.Fatalf("orphans = %d, want none: the render was the worker's", n)
		}
		if st := get(t, mem, "web", 1).Info.Status; st != helmrelease.StatusPendingInstall {
			t.Errorf("the render wrote %s", st)
		}
	})
	t.Run("guarded decode", func(t *testing.T) {
		f, err := NewFactory(&rest.Config{Host: "http://127.0.0.1:1"}, WithEngine(EngineV4))
		if err != nil {
			t.Fatal(err)
		}
		si := garbageSecrets{fake.NewClientset().CoreV1().Secrets("ns")}
		_, err = f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2},
			WithSecretsClient(func(typedcorev1.SecretInterface) typedcorev1.SecretInterface { return si }),
			WithV4KubeClient(&kubefake4.PrintingKubeClient{Out: io.Discard}), WithCapabilities(chartutil.DefaultCapabilities))
		if err == nil || errors.Is(err, ErrHelmPanicked) {
			t.Errorf("upgrade over an undecodable record: %v, want an error that is not a panic", err)
		}
	})
}
