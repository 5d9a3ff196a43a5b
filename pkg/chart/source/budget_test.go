package source

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/async-helm/async-helm/internal/testcharts/hostile"
	"github.com/async-helm/async-helm/pkg/fairqueue"
)

var (
	tgz       = hostile.Archive
	chartYAML = hostile.ChartYAML
	bomb      = hostile.Bomb
	nested    = hostile.Nested
)

type entry = hostile.Entry

func serve(t *testing.T, archive []byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write(archive) }))
	t.Cleanup(srv.Close)
	return srv.URL + "/chart.tgz"
}

// The bomb: a few KiB whose 3 nested subcharts unpack to 288 MiB (each under Helm's
// per-archive cap) is refused by the total budget, and loading it allocates a few MiB, not
// hundreds (Helm's loader alone allocated over 285 MiB).
func TestNestedChartBombIsRefusedWithinItsBudget(t *testing.T) {
	refusedWithin(t, bomb(t, 3, 96<<20), "chart unpacks to more than 64 MiB across its nested archives", 16<<20)
}

// refusedWithin fetches archive as a chart and wants it refused as too large, naming want,
// with at most most bytes allocated (the budget is checked before Helm's loader allocates).
func refusedWithin(t *testing.T, archive []byte, want string, most uint64) {
	t.Helper()
	t.Logf("archive: %d bytes on the wire", len(archive))
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(time.Minute)}
	u := serve(t, archive)
	var err error
	n := allocated(func() { _, err = src.Get(context.Background(), Ref{URL: u}) })
	t.Logf("Get: %v; allocated %d MiB", err, n>>20)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), want) {
		t.Errorf("Get: %v, want ErrTooLarge naming %q", err, want)
	}
	if n > most {
		t.Errorf("refusing the archive allocated %d MiB, want at most %d", n>>20, most>>20)
	}
}

// The budget is one for the whole tree: two subcharts each well within it are refused
// together; the same chart with one of them loads.
func TestChartBudgetCountsEveryLevel(t *testing.T) {
	small := Budget{MaxBytes: 8 << 20}
	if _, err := small.Load(bomb(t, 2, 4<<20)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("2 x 4 MiB in an 8 MiB budget: %v, want ErrTooLarge", err)
	}
	ch, err := small.Load(bomb(t, 1, 4<<20))
	if err != nil || len(ch.Dependencies()) != 1 || len(ch.Dependencies()[0].Files) != 1 {
		t.Fatalf("1 x 4 MiB in an 8 MiB budget: %v", err)
	}
	// A subchart as a directory holding an archive: Helm unpacks that too.
	inDir := tgz(t, chartYAML("top"), chartYAML("top/charts/dir"),
		entry{Name: "top/charts/dir/charts/sub.tgz", Data: bomb(t, 2, 4<<20)})
	if _, err := small.Load(inDir); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a bomb under a directory subchart: %v, want ErrTooLarge", err)
	}
}

func TestChartBudgetBoundsFilesAndDepth(t *testing.T) {
	files := []entry{chartYAML("many")}
	for i := 0; i < 30; i++ {
		files = append(files, entry{Name: fmt.Sprintf("many/files/f%d", i), Data: []byte{}})
	}
	_, err := Budget{MaxFiles: 20}.Load(tgz(t, files...))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "holds more than 20 files across its nested archives") {
		t.Errorf("31 files, 20 allowed: %v", err)
	}
	_, err = Budget{MaxDepth: 2}.Load(nested(t, 3))
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "nests archives more than 2 deep") {
		t.Errorf("3 deep, 2 allowed: %v", err)
	}
	ch, err := Budget{MaxDepth: 3}.Load(nested(t, 3))
	if err != nil || ch.Dependencies()[0].Dependencies()[0].Dependencies()[0].Name() != "level0" {
		t.Errorf("3 deep, 3 allowed: %v", err)
	}
	if _, err := (Budget{}).Load([]byte("not gzip")); !errors.Is(err, ErrUnloadable) {
		t.Errorf("not an archive: %v, want ErrUnloadable", err)
	}
}

// A Chart made without a Source (its archive never checked) is checked when loaded.
func TestFreshChecksAnUncheckedArchive(t *testing.T) {
	if _, err := (&Chart{Data: bomb(t, 1, 80<<20)}).Fresh(context.Background()); !errors.Is(err, ErrTooLarge) {
		t.Errorf("Fresh of an unchecked bomb: %v, want ErrTooLarge", err)
	}
}

// Only what Helm's loader unpacks as a subchart archive is scanned as one.
func TestSubchartArchivesAreHelms(t *testing.T) {
	helmPath := func(name string) string {
		n, _ := loaderName(name)
		return n
	}
	for n, want := range map[string]bool{
		"charts/a.tgz":                 true,
		"charts/d/charts/a.tgz":        true,
		"charts/_a.tgz":                false,
		"charts/.a.tgz":                false,
		"charts/_d/charts/a.tgz":       false,
		"charts/a.tgz.prov":            false,
		"templates/a.tgz":              false,
		"files/charts/a.tgz":           false,
		"charts/d/templates/a.tgz":     false,
		helmPath(`top\charts\a.tgz`):   true,
		helmPath("top/./charts/a.tgz"): true,
	} {
		if got := isSubchartArchive(n); got != want {
			t.Errorf("isSubchartArchive(%q) = %v, want %v", n, got, want)
		}
	}
}

func TestBudgetSettings(t *testing.T) {
	b, err := Settings{ChartMaxUnpackedMiB: 32, ChartMaxFiles: 100, ChartMaxYAMLNodes: 5000}.Budget()
	if err != nil || b != (Budget{MaxBytes: 32 << 20, MaxFiles: 100, MaxDepth: DefaultBudget.MaxDepth, MaxNodes: 5000, MaxSchemaNodes: DefaultBudget.MaxSchemaNodes,
		MaxCRDNodes: DefaultBudget.MaxCRDNodes}) {
		t.Errorf("budget %+v, %v", b, err)
	}
	if _, err := (Settings{ChartMaxDepth: -1}).Budget(); err == nil {
		t.Error("a negative depth was accepted")
	}
	if b, err := (Settings{}).Budget(); err != nil || b != DefaultBudget {
		t.Errorf("unset settings: budget %+v, %v, want %+v", b, err, DefaultBudget)
	}
}

// At most MaxParallelLoads archives are checked and loaded at once: with the one slot
// taken, a Get waits (here until its context ends), and goes on once the slot is free.
func TestChartLoadsWaitForASlot(t *testing.T) {
	src := &Source{HTTP: Policy{AllowLoopback: true}.HTTPClient(time.Minute), MaxParallelLoads: 1}
	u := serve(t, tgz(t, chartYAML("tiny")))
	src.loadsOnce.Do(func() { src.loads = fairqueue.New(1, fairqueue.Options{}) })
	held, _ := src.loads.TryAcquire(Tenant{Namespace: "other"}) // another load runs
	// The download takes milliseconds; the context ends long after, while Get waits.
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if _, err := src.Get(ctx, Ref{URL: u}); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "wait to load the chart") {
		t.Errorf("Get while the only load slot is taken: %v, want it to wait until its context ended", err)
	}
	held.Release()
	if _, err := src.Get(context.Background(), Ref{URL: u}); err != nil {
		t.Errorf("Get with a free slot: %v", err)
	}
}

// A chart whose files/ or templates/ hold a file over Helm's 5 MiB per-file cap is refused
// in the words of Helm's loader (and so of the helm CLI), as when Helm unpacked it itself.
func TestAFileOverHelmsCapIsRefusedInHelmsWords(t *testing.T) {
	big := bytes.Repeat([]byte("# x\n"), (6<<20)/4)
	archive := tgz(t, chartYAML("web"), entry{Name: "web/files/big.txt", Data: big})
	_, helmErr := loader.LoadArchive(bytes.NewReader(archive))
	_, err := Budget{}.Load(archive)
	if helmErr == nil || err == nil || !strings.Contains(err.Error(), helmErr.Error()) || !errors.Is(err, ErrUnloadable) {
		t.Errorf("the chart's refusal says %q, Helm's loader says %q", err, helmErr)
	}
}
