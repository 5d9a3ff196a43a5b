package repos

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	goruntime "runtime"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
)

// bigProject is a project repository with annotations of annotation bytes (any object may
// carry 256 KiB) whose spec.connectionConfig.ca.name is caName.
func bigProject(ns, name string, annotation int, caName string) *unstructured.Unstructured {
	o := repoObject("ProjectHelmChartRepository", ns, name, "https://mallory.example/", false, map[string]string{"ca": caName})
	o.SetAnnotations(map[string]string{"mallory.example/pad": strings.Repeat("a", annotation)})
	return o
}

func heapNow() uint64 {
	goruntime.GC()
	var m goruntime.MemStats
	goruntime.ReadMemStats(&m)
	return m.HeapAlloc
}

// objectServer is an API server that lists n project repositories built by object, as
// JSON (the informer holds what it decoded), and watches nothing.
func objectServer(t *testing.T, n int, object func(i int) *unstructured.Unstructured) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("watch") == "true" || q.Get("watch") == "1" {
			if q.Get("sendInitialEvents") == "true" {
				http.Error(w, "watch-list is not served here", http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"apiVersion":"helm.openshift.io/v1beta1","kind":"List","metadata":{"resourceVersion":"1"},"items":[`)
		for i := 0; strings.HasSuffix(r.URL.Path, "/projecthelmchartrepositories") && i < n; i++ {
			o := object(i)
			o.SetResourceVersion("1")
			b, _ := json.Marshal(o.Object)
			if i > 0 {
				_, _ = io.WriteString(w, ",")
			}
			_, _ = w.Write(b)
		}
		_, _ = io.WriteString(w, "]}")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The informers keep of each repository object only the fields read: 20 objects of a
// tenant with 250 KiB of annotations each, half of them naming a CA ConfigMap of 1 MiB
// (no name may be that long), hold next to nothing; the half with a usable name still
// resolve, the others are invalid repositories saying why.
func TestInformersKeepOnlyTheFieldsRead(t *testing.T) {
	const n = 20
	srv := objectServer(t, n, func(i int) *unstructured.Unstructured {
		ca := "ca"
		if i%2 == 1 {
			ca = strings.Repeat("c", 1<<20)
		}
		return bigProject("mallory", fmt.Sprintf("r%02d", i), 250<<10, ca)
	})
	dyn, err := dynamic.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	src := &chartsource.Source{HTTP: chartsource.Policy{AllowLoopback: true}.HTTPClient(10 * time.Second)}
	s := &Set{Dynamic: dyn, Client: fake.NewSimpleClientset(cm("mallory", "ca", KeyCABundle, "a CA")), Source: src, Refresh: time.Hour, NoIndex: true}
	src.Repos = s
	before := heapNow()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := s.Start(ctx, nil); err != nil {
		t.Fatal(err)
	}
	held := int64(heapNow()) - int64(before)
	repos := s.Repos(ctx, "mallory")
	t.Logf("%d project repositories of %d KiB each: the Set holds %d of them, heap +%d KiB", n, (250<<10+1<<20)>>10, len(repos), held>>10)
	if held > 4<<20 {
		t.Errorf("one tenant's %d repository objects made the Set hold %d MiB", n, held>>20)
	}
	for i, r := range repos {
		if i%2 == 0 && (r.Err != nil || string(r.CA) != "a CA") {
			t.Errorf("%s: CA %q, %v; want its CA", r.Name, r.CA, r.Err)
		}
		if got := fmt.Sprint(r.Err); i%2 == 1 && !strings.Contains(got, "spec.connectionConfig.ca.name is 1048576 bytes, over 253") {
			t.Errorf("%s: %.100s, want its ca.name refused", r.Name, got)
		}
	}
}

// slim keeps the fields read and nothing else, refuses a field of another type than the
// CRD's, and leaves its own result as it is (client-go may transform an object twice).
func TestSlimKeepsTheFieldsRead(t *testing.T) {
	s := &Set{Log: zap.NewNop().Sugar()}
	o := repoObject("ProjectHelmChartRepository", "team", "r", "https://x.example/", true,
		map[string]string{"ca": "ca", "tlsClientConfig": "tls", "basicAuthConfig": "auth"})
	o.SetLabels(map[string]string{"a": "b"})
	o.SetUID("u1")
	_ = unstructured.SetNestedField(o.Object, "Team charts", "spec", "name")
	_ = unstructured.SetNestedField(o.Object, map[string]any{"conditions": []any{}}, "status")
	want := o.DeepCopy()
	unstructured.RemoveNestedField(want.Object, "metadata", "labels")
	unstructured.RemoveNestedField(want.Object, "status")
	odd := o.DeepCopy()
	_ = unstructured.SetNestedField(odd.Object, map[string]any{"x": "y"}, "spec", "connectionConfig", "url")
	for _, tc := range []struct {
		name string
		in   *unstructured.Unstructured
		want func(*unstructured.Unstructured) bool
	}{
		{"read fields", o, func(got *unstructured.Unstructured) bool { return reflect.DeepEqual(got.Object, want.Object) }},
		{"a map for a URL", odd, func(got *unstructured.Unstructured) bool {
			reason, _, _ := unstructured.NestedString(got.Object, refusedPath...)
			return reason == "spec.connectionConfig.url is a map[string]interface {}: refused" && len(got.Object["spec"].(map[string]any)) == 1
		}},
	} {
		once, _ := s.slim(tc.in)
		twice, _ := s.slim(once)
		if !tc.want(once.(*unstructured.Unstructured)) || !reflect.DeepEqual(once, twice) {
			t.Errorf("%s: slim = %v, again %v", tc.name, once, twice)
		}
	}
}

// A change of a tenant's own repository object refreshes no index (its own is fetched on
// use, keyed by its configuration); an administrator's refreshes theirs at once.
func TestAProjectRepositoryChangeRefreshesNoIndex(t *testing.T) {
	s := &Set{kick: make(chan struct{}, 1)}
	o := repoObject("ProjectHelmChartRepository", "mallory", "mine", "https://mallory.example/", false, nil)
	for _, tc := range []struct {
		scope Scope
		kicks bool
	}{{ScopeProject, false}, {ScopeCluster, true}} {
		if h := s.onChange(tc.scope); h != nil {
			h.OnUpdate(o, o)
		}
		select {
		case <-s.kick:
			if !tc.kicks {
				t.Errorf("a change of a %s repository refreshes every administrator's index", tc.scope)
			}
		default:
			if tc.kicks {
				t.Errorf("a change of a %s repository refreshes nothing", tc.scope)
			}
		}
	}
}
