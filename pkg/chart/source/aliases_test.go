package source

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/async-helm/async-helm/internal/testcharts/hostile"
)

// allocated is what f allocates, in bytes.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A chart of a few KiB whose values.yaml aliases one 1 MiB scalar 200 times parses into
// ~200 MiB with Helm's loader (sigs.k8s.io/yaml writes every alias out): the budget counts
// the aliases written out, and refuses it before the loader runs (one such
// archive allocated 4.8 GiB unbounded).
func TestValuesAliasBombIsRefusedWithinItsBudget(t *testing.T) {
	archive := tgz(t, chartYAML("bomb"),
		entry{Name: "bomb/values.yaml", Data: hostile.AliasBomb("", 1<<20, 200)})
	refusedWithin(t, archive, "once its YAML aliases are written out", 32<<20)
}

// Every file the loader parses is measured, in subcharts too; aliases within the budget
// load as before.
func TestChartYAMLAliasesAreMeasuredAtEveryLevel(t *testing.T) {
	sub := tgz(t, chartYAML("sub"),
		entry{Name: "sub/Chart.yaml", Data: hostile.AliasBomb("apiVersion: v2\nname: sub\nversion: 0.1.0\n", 1<<20, 100)})
	parent := tgz(t, chartYAML("top"), entry{Name: "top/charts/sub-0.1.0.tgz", Data: sub})
	if _, err := (Budget{}).Load(parent); !errors.Is(err, ErrTooLarge) {
		t.Errorf("alias bomb in a subchart's Chart.yaml: %v, want ErrTooLarge", err)
	}
	fine := tgz(t, chartYAML("fine"), entry{Name: "fine/values.yaml",
		Data: []byte("base: &b {image: nginx}\nweb: *b\nworker: *b\nhost: \"*.example.com\"\n")})
	ch, err := (Budget{}).Load(fine)
	if err != nil {
		t.Fatalf("a chart with a few aliases: %v", err)
	}
	if web, _ := ch.Values["web"].(map[string]any); web["image"] != "nginx" {
		t.Errorf("values after load: %v", ch.Values)
	}
}

// A repository's index.yaml of 3 MiB (under the 10 MiB bound) that aliases its scalar 200
// times is refused before it is parsed (it allocated 4.2 GiB before).
func TestIndexAliasBombIsRefused(t *testing.T) {
	indexRefusedWithin(t, hostile.AliasBomb("apiVersion: v1\nentries: {}\n", 3<<20, 200), "once its aliases are written out", 64<<20)
}

// indexRefusedWithin serves body as a repository's index.yaml and checks FetchIndex refuses
// it as too large, naming want, within most bytes allocated.
func indexRefusedWithin(t *testing.T, body []byte, want string, most uint64) {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(body) }))
	defer srv.Close()
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(time.Minute)}
	var err error
	n := allocated(func() { _, err = src.FetchIndex(context.Background(), Repository{Name: "evil", URL: srv.URL}) })
	t.Logf("FetchIndex: %v; allocated %d MiB", err, n>>20)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), want) {
		t.Errorf("index.yaml: %v, want ErrTooLarge naming %q", err, want)
	}
	if n > most {
		t.Errorf("refusing the index allocated %d MiB, want at most %d", n>>20, most>>20)
	}
}

// A loader YAML file over Helm's own 5 MiB cap is refused before it is read, let alone
// parsed to measure its aliases (20 MiB of "{}," with one alias took 1.3 GiB in
// Check).
func TestOversizedLoaderYAMLIsNotRead(t *testing.T) {
	archive := tgz(t, chartYAML("big"), entry{Name: "big/values.yaml", Size: 20 << 20})
	refusedWithin(t, archive, "has a YAML file over Helm's 5 MiB", 8<<20)
}
