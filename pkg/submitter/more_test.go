package submitter

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corelisters "k8s.io/client-go/listers/core/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// Of concurrent installs of one name exactly one is accepted; the others are refused
// with a conflict or name-in-use, and only one event goes out.
func TestConcurrentInstallsOneWinner(t *testing.T) {
	e := newEnv(t)
	var mu sync.Mutex
	n := 0
	e.svc.NewID = func() string { mu.Lock(); defer mu.Unlock(); n++; return "req-" + strings.Repeat("x", n) }
	var wg sync.WaitGroup
	errs := make([]error, 6)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil)
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, release.ErrConflict) && !errors.Is(err, release.ErrNameInUse):
			t.Errorf("loser: %v", err)
		}
	}
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

// A request whose values satisfy the schema once merged over the chart's defaults passes.
func TestValidateValues(t *testing.T) {
	schema := []byte(`{"type":"object","required":["image"],"properties":{"image":{"type":"string"},"replicas":{"type":"integer","minimum":1}}}`)
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "c", Version: "1"}, Schema: schema, Values: map[string]interface{}{"image": "nginx"}}
	for _, tc := range []struct {
		name   string
		values map[string]interface{}
		ok     bool
	}{
		{"defaults only", nil, true},
		{"override", map[string]interface{}{"replicas": 3}, true},
		{"below the minimum", map[string]interface{}{"replicas": 0}, false},
		{"wrong type", map[string]interface{}{"image": 7}, false},
	} {
		err := validateValues(ch, tc.values)
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrValues)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
	if err := validateValues(&chart.Chart{Metadata: &chart.Metadata{Name: "c"}}, map[string]interface{}{"x": 1}); err != nil {
		t.Errorf("a chart without schema: %v", err)
	}
	if err := validateValues(nil, nil); err != nil {
		t.Errorf("no chart: %v", err)
	}
}

// An upgrade without a chart whose previous revision cannot be read is refused, nothing reserved.
func TestUpgradeWithoutPreviousChart(t *testing.T) {
	e := newEnv(t)
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.MarkFailed(ctx(t), "ns", "web", 1, "x", false); err != nil {
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
