package helmexec

import (
	"bufio"
	"cmp"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"unicode/utf8"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
)

// RenderChildArg, as a binary's first argument, runs it as a render worker (RunRenderChild)
// instead of its usual self: it runs one job after another for the process that started it.
const RenderChildArg = "__async-helm-render-worker"

// workerJob is one render a worker is asked: a chart's templates as Helm's install or
// upgrade renders them, with the values, release and capabilities Helm renders with.
type workerJob struct {
	Render GuardRender `json:"render"`
	// Engine is the Helm whose engine renders ("": v3): each engine's render is its own.
	Engine Engine `json:"engine,omitempty"`
	// Lookups: the templates' `lookup` calls are asked of the parent on the worker's own
	// pipes, answered as the job's identity (false: no cluster, lookups find nothing).
	Lookups bool `json:"lookups,omitempty"`
	// Schemas: the values are checked against the chart's schemas first, as Helm's install
	// or upgrade checks them, off the values the render coalesces.
	Schemas bool `json:"schemas,omitempty"`
	// Checks, in a job without a chart, are values checks alone: the answer says whether
	// the values meet them.
	Checks []SchemaCheck `json:"checks,omitempty"`
	// Archive, when set, is rendered instead of Render (Renderer.Render).
	Archive *ChartRender `json:"archive,omitempty"`
}

// workerMsg is what a worker writes while it runs a job: lookups, then the result.
type workerMsg struct {
	Lookup *lookupRequest `json:"lookup,omitempty"`
	Result *workerResult  `json:"result,omitempty"`
	// Checked: the job's values met their schemas; the render starts.
	Checked bool `json:"checked,omitempty"`
}

// Kinds of a worker's failure the parent maps onto its errors.
const (
	workerFailedTemplate = "template" // the chart's own error (Helm's text)
	workerFailedTooLarge = "too-large"
	workerFailedValues   = "values"   // values that do not meet their schemas (Helm's text)
	workerFailedCoalesce = "coalesce" // values Helm cannot coalesce with the chart's (Helm's text)
)

// workerResult is a worker's answer to one job.
type workerResult struct {
	// Files travel raw after the JSON, in the order of Names (writeResult).
	Files map[string]string `json:"-"`
	Names []string          `json:"names,omitempty"`
	// Manifest is an Archive job's answer.
	Manifest string `json:"manifest,omitempty"`
	Failed   string `json:"failed,omitempty"` // a workerFailed kind
	Error    string `json:"error,omitempty"`
	// HeapBytes is the worker's heap after the job: a large one retires the worker.
	HeapBytes uint64 `json:"heapBytes"`
}

// init makes every binary that starts workers (submit's template route and values checks,
// the executor's renders) its own worker, whatever its main does.
func init() {
	if IsRenderChild(os.Args) {
		os.Exit(RunRenderChild(os.Args, os.Stdin, os.Stdout))
	}
}

// IsRenderChild tells whether a process was started as a render worker (its os.Args).
func IsRenderChild(args []string) bool {
	return len(args) > 1 && args[1] == RenderChildArg
}

// RunRenderChild is a worker's main: jobs framed on in, results framed on out, until in
// closes; a job's lookups are asked on out and answered on in. The worker bounds its own
// address space first (the memory bound after RenderChildArg in args) and offers itself to
// the kernel's OOM killer before its parent.
func RunRenderChild(args []string, in io.Reader, out io.Writer) int {
	if len(args) > 2 {
		if limit, err := strconv.ParseInt(args[2], 10, 64); err == nil && limit > 0 {
			limitMemory(limit)
		}
	}
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	r, w := bufio.NewReader(in), bufio.NewWriter(out)
	for {
		job, err := readJob(r)
		if err != nil {
			if errors.Is(err, io.EOF) {
				return 0
			}
			fmt.Fprintf(os.Stderr, "render worker: %v\n", err)
			return 1
		}
		res := renderJob(job, &pipeLookups{in: r, out: w})
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		res.HeapBytes = ms.HeapSys - ms.HeapReleased
		if err := writeResult(w, res); err != nil {
			fmt.Fprintf(os.Stderr, "render worker: %v\n", err)
			return 1
		}
	}
}

// limitMemory bounds this process's growth to limit bytes of address space from now on,
// over what Go reserved at start. Not RLIMIT_DATA: Go's heap can pass it (a MAP_FIXED
// mapping over reserved address space counts as no growth).
func limitMemory(limit int64) {
	base := vmSize()
	_ = syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: uint64(base + limit), Max: uint64(base + limit)})
	debug.SetMemoryLimit(limit / 2) // collect hard well before the limit
}

// vmSize is this process's address space in bytes (0 when unknown: the bound is then
// the limit alone, which fails the first large reservation).
func vmSize() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmSize:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// renderJob checks the values, renders as Helm's install or upgrade does, and measures the
// output's expansion before the parent parses any of it; lookups go through pipe.
func renderJob(job workerJob, pipe *pipeLookups) workerResult {
	g := job.Render
	switch {
	case job.Archive != nil:
		out, msg := renderArchive(*job.Archive)
		return workerResult{Manifest: out, Error: msg}
	case g.Chart.Chart == nil && len(job.Checks) > 0:
		res, _ := checkJob(job.Checks, pipe)
		return res
	case g.Chart.Chart == nil || g.Chart.Chart.Metadata == nil:
		return workerResult{Failed: workerFailedTemplate, Error: "no chart"}
	}
	ch := g.Chart.chart()
	caps := cmp.Or(g.Caps, chartutil.DefaultCapabilities)
	// Helm's order: the values coalesced, checked, then rendered.
	vals, err := chartutil.ToRenderValuesWithSchemaValidation(ch, g.Values, g.Release, caps, true)
	if err != nil {
		return workerResult{Failed: workerFailedCoalesce, Error: err.Error()}
	}
	if job.Schemas {
		if res, ok := checkJob(collectChecks(ch, vals["Values"].(chartutil.Values)), pipe); !ok {
			return res
		}
	}
	var lookups *rest.Config // nil: no cluster, lookups find nothing
	if job.Lookups {
		lookups = lookupConfig(pipe)
	}
	var files map[string]string
	if job.Engine == EngineV4 {
		files, err = renderV4(g, ch, lookups)
	} else {
		files, err = renderV3(ch, vals, lookups)
	}
	if err != nil {
		return workerResult{Failed: workerFailedTemplate, Error: err.Error()}
	}
	if err := frozenAsRendered(files); err != nil {
		return workerResult{Failed: workerFailedTemplate, Error: err.Error()}
	}
	if err := measure(withCRDs(files, ch)); err != nil {
		return workerResult{Failed: workerFailedTooLarge, Error: err.Error()}
	}
	return workerResult{Files: files}
}

// checkJob makes the values checks, and tells the parent they passed before the render
// starts; false with the result to answer when they fail.
func checkJob(checks []SchemaCheck, pipe *pipeLookups) (workerResult, bool) {
	var msgs strings.Builder
	for _, c := range checks {
		msgs.WriteString(checkOne(c))
	}
	if msgs.Len() > 0 {
		return workerResult{Failed: workerFailedValues, Error: msgs.String()}, false
	}
	if err := pipe.send(workerMsg{Checked: true}); err != nil {
		return workerResult{Failed: workerFailedTemplate, Error: err.Error()}, false
	}
	return workerResult{}, true
}

// renderV3 renders ch with its render values as Helm v3's install or upgrade does; lookups
// go through cfg (nil: they find nothing).
func renderV3(ch *chart.Chart, vals chartutil.Values, cfg *rest.Config) (map[string]string, error) {
	e := engine.Engine{}
	if cfg != nil {
		e = engine.New(cfg)
	}
	return e.Render(ch, vals)
}

// frozenAsRendered refuses output that would not reach Helm byte for byte: bytes that are
// not UTF-8 (Helm's own YAML parse refuses them anyway), and "<no value>", which Helm's
// render of the frozen chart removes once more (a template can build it out of two
// halves). What is checked here is then what is applied.
func frozenAsRendered(files map[string]string) error {
	for n, f := range files {
		switch {
		case !utf8.ValidString(f):
			return fmt.Errorf("%s: the rendered manifest is not UTF-8", n)
		case strings.Contains(f, noValue):
			return fmt.Errorf("%s: the rendered manifest holds %q, which Helm's render removes", n, noValue)
		}
	}
	return nil
}

// withCRDs is files and the chart's CRD files: Helm's install parses those as they are, in
// the parent, so their aliases count against the same bound.
func withCRDs(files map[string]string, ch *chart.Chart) map[string]string {
	crds := ch.CRDObjects()
	if len(crds) == 0 {
		return files
	}
	all := make(map[string]string, len(files)+len(crds))
	maps.Copy(all, files)
	for _, c := range crds {
		all[c.Filename] = string(c.File.Data)
	}
	return all
}

// noValue is what Helm's engine removes from every render (a missing value's text).
const noValue = "<no value>"

// measure bounds the files' expansion with every alias written out, in bytes and in nodes
// (bounds.MaxRenderedBytes, MaxRenderedNodes), over the whole render.
func measure(files map[string]string) error {
	names := slices.Sorted(maps.Keys(files))
	total := yamlsize.NewTotal(yamlsize.Size{Bytes: bounds.MaxRenderedBytes, Nodes: bounds.MaxRenderedNodes})
	for _, n := range names {
		if err := total.Add([]byte(files[n])); err != nil {
			return fmt.Errorf("%s: %v (bounds: %d MiB, %d nodes)", n, err, bounds.MaxRenderedBytes>>20, bounds.MaxRenderedNodes)
		}
	}
	return nil
}
