package submitter

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/chart/bounds"
	"github.com/async-helm/async-helm/pkg/release"
)

// Of concurrent installs of one name exactly one is accepted; the others are refused
// with a conflict or name-in-use, and only one event goes out.
func TestConcurrentInstallsOneWinner(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	n := 0
	e.svc.NewID = func() string { mu.Lock(); defer mu.Unlock(); n++; return "req-" + strings.Repeat("x", n) }
	won := winners(t, e.submitAtOnce(6, release.ActionInstall, install("web")), release.ErrConflict, release.ErrNameInUse)
	if won != 1 || len(e.sender.sent) != 1 || len(e.secrets()) != 1 {
		t.Errorf("%d accepted, %d events, %d reservations", won, len(e.sender.sent), len(e.secrets()))
	}
}

type brokenNamespaces struct{ corelisters.NamespaceLister }

func (brokenNamespaces) Get(string) (*corev1.Namespace, error) {
	return nil, errors.New("cache broken")
}
func (brokenNamespaces) List(labels.Selector) ([]*corev1.Namespace, error) {
	return nil, errors.New("cache broken")
}

func TestNamespaceLookupError(t *testing.T) {
	e := newEnv(t)
	e.svc.Namespaces = brokenNamespaces{}
	_, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil)
	if err == nil || errors.Is(err, ErrNamespaceNotFound) || !strings.Contains(err.Error(), "cache broken") {
		t.Errorf("a broken namespace cache reads as %v", err)
	}
}

// A request whose values satisfy the schema once merged over the chart's defaults passes;
// one that does not is refused in Helm's own words. The compiled schema is kept by digest.
func TestValidateValues(t *testing.T) {
	schema := []byte(`{"type":"object","required":["image"],"properties":{"image":{"type":"string"},"replicas":{"type":"integer","minimum":1}}}`)
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "c", Version: "1"}, Schema: schema, Values: map[string]any{"image": "nginx"}}
	schemas := NewSchemas(8)
	for _, tc := range []struct {
		name   string
		values map[string]any
		ok     bool
	}{
		{"defaults only", nil, true},
		{"override", map[string]any{"replicas": 3}, true},
		{"below the minimum", map[string]any{"replicas": 0}, false},
		{"wrong type", map[string]any{"image": 7}, false},
	} {
		for _, s := range []*Schemas{nil, schemas} { // compiled per request, and kept
			err := s.validateValues(t.Context(), ch, "sha256:c", tc.values)
			if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrValues)) {
				t.Errorf("%s: %v", tc.name, err)
			}
			if err == nil {
				continue
			}
			merged, _ := chartutil.CoalesceValues(ch, tc.values)
			helm := chartutil.ValidateAgainstSingleSchema(merged, schema)
			if want := ErrValues.Error() + ": " + helm.Error(); err.Error() != want {
				t.Errorf("%s: %q, want Helm's words %q", tc.name, err, want)
			}
		}
	}
	if n := len(schemas.compiled.Keys()); n != 1 {
		t.Errorf("%d schemas kept for one digest", n)
	}
	if err := schemas.validateValues(t.Context(), &chart.Chart{Metadata: &chart.Metadata{Name: "c"}}, "", map[string]any{"x": 1}); err != nil {
		t.Errorf("a chart without schema: %v", err)
	}
	if err := schemas.validateValues(t.Context(), nil, "", nil); err != nil {
		t.Errorf("no chart: %v", err)
	}
}

// A schema that refers to a file or a URL is not checked by submit, which never reads what
// a chart names (Helm checks it in the executor); nothing is fetched.
func TestValidateValuesReadsNothingASchemaNames(t *testing.T) {
	hits := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hits++
		_, _ = w.Write([]byte(`{"type":"string"}`))
	}))
	defer srv.Close()
	for _, ref := range []string{srv.URL + "/image.json", "file:///etc/passwd"} {
		schema := []byte(`{"type":"object","properties":{"image":{"$ref":"` + ref + `"}}}`)
		ch := &chart.Chart{Metadata: &chart.Metadata{Name: "c", Version: "1"}, Schema: schema}
		if err := NewSchemas(8).validateValues(t.Context(), ch, "sha256:d", map[string]any{"image": 7}); err != nil {
			t.Errorf("$ref %s: %v, want the check left to Helm in the executor", ref, err)
		}
	}
	if hits != 0 {
		t.Errorf("submit fetched the schema's $ref %d times", hits)
	}
}

// An upgrade without a chart whose previous revision cannot be read is refused, nothing reserved.
func TestUpgradeWithoutPreviousChart(t *testing.T) {
	e := newEnv(t)
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.MarkFailed(ctx(t), "ns", "web", 1, "x", release.KeepFailed); err != nil {
		t.Fatal(err)
	}
	e.c.Fail("get", "secrets", errors.New("apiserver down"))
	_, err := e.svc.Submit(context.Background(), release.ActionUpgrade, api.ReleaseRequest{Name: "web", Namespace: "ns"}, nil)
	if err == nil || !strings.Contains(err.Error(), "apiserver down") {
		t.Errorf("Submit: %v", err)
	}
	e.c.Fail("get", "secrets", nil)
	if n := len(e.secrets()); n != 1 {
		t.Errorf("%d reservations", n)
	}
}

// submitAtOnce sends n copies of req at the same time and returns their errors.
func (e *env) submitAtOnce(n int, action release.Action, req api.ReleaseRequest) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = e.svc.Submit(ctx(e.t), action, req, nil)
		}()
	}
	wg.Wait()
	return errs
}

// winners counts the nil errors; every other one must be one of losers (409s).
func winners(t *testing.T, errs []error, losers ...error) int {
	t.Helper()
	won := 0
	for _, err := range errs {
		if err == nil {
			won++
			continue
		}
		known := false
		for _, l := range losers {
			known = known || errors.Is(err, l)
		}
		if !known {
			t.Errorf("a loser's error: %v, want one of %v", err, losers)
		}
	}
	return won
}

// Schemas of more than bounds.SmallSchemaNodes subschemas are kept apart, a few at most: each
// may hold several MiB compiled, and 256 of them were kept with the small ones.
func TestLargeSchemasAreKeptAFewAtMost(t *testing.T) {
	schemas := NewSchemas(256)
	large := []byte(`{"allOf": [` + strings.Repeat("{},", bounds.SmallSchemaNodes) + `{}]}`)
	for i := 0; i < 10; i++ {
		if _, err := schemas.get(fmt.Sprintf("sha256:%d", i), large); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := schemas.get("sha256:small", []byte(`{"type": "object"}`)); err != nil {
		t.Fatal(err)
	}
	if n, small := len(schemas.large.Keys()), len(schemas.compiled.Keys()); n != bounds.LargeSchemasKept || small != 1 {
		t.Errorf("%d large and %d small schemas kept, want %d and 1", n, small, bounds.LargeSchemasKept)
	}
}
