package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"time"
)

// row is one line of the table: a figure beside its floor or baseline from the same run.
type row struct {
	Section  string  `json:"section"`
	Figure   string  `json:"figure"`
	Value    float64 `json:"value"`
	Unit     string  `json:"unit"`
	Baseline string  `json:"baseline,omitempty"` // what the value is compared with
	Base     float64 `json:"baselineValue,omitempty"`
	Ratio    float64 `json:"ratio,omitempty"`
	Target   string  `json:"target,omitempty"`
	// Verdict is ok or MISSED for rows with a target, "-" for the others.
	Verdict string `json:"verdict"`
	Note    string `json:"note,omitempty"`
}

// figure is a value with its unit, formatted for the table.
type figure struct {
	v    float64
	unit string
}

func msF(d time.Duration) figure { return figure{float64(d.Microseconds()) / 1000, "ms"} }
func rateF(r float64) figure     { return figure{r, "/s"} }
func mibF(b int64) figure        { return figure{float64(b) / (1 << 20), "MiB"} }

func (f figure) String() string {
	switch {
	case f.unit == "/s" && f.v < 10:
		return fmt.Sprintf("%.2f/s", f.v)
	case f.unit == "/s":
		return fmt.Sprintf("%.0f/s", f.v)
	case f.unit == "calls" || f.unit == "events":
		return fmt.Sprintf("%.0f %s", f.v, f.unit)
	case f.unit == "MiB":
		return fmt.Sprintf("%.0f MiB", f.v)
	case f.unit == cpuMs:
		return fmt.Sprintf("%.2f ms CPU", f.v)
	case f.unit == "ms" && f.v >= 10000:
		return fmt.Sprintf("%.1f s", f.v/1000)
	case f.unit == "ms" && f.v >= 100:
		return fmt.Sprintf("%.0f ms", f.v)
	case f.unit == "ms":
		return fmt.Sprintf("%.1f ms", f.v)
	}
	return fmt.Sprintf("%.2f %s", f.v, f.unit)
}

// compare adds a row: value against base, ratio value/base. check, when set, decides the
// verdict from value and base (target describes it).
func (b *bench) compare(section, name string, value figure, baseName string, base figure, target string, check func(v, base float64) bool, note string) {
	r := row{Section: section, Figure: name, Value: value.v, Unit: value.unit, Baseline: baseName, Base: base.v, Target: target, Verdict: "-", Note: note}
	if base.v != 0 {
		r.Ratio = value.v / base.v
	}
	if check != nil {
		r.Verdict = "ok"
		if !check(value.v, base.v) {
			r.Verdict = "MISSED"
		}
	}
	b.rows = append(b.rows, r)
	b.logf("  %s: %s | %s %s | %s | %s %s", name, value, baseName, base, ratioText(r.Ratio), target, r.Verdict)
}

// info adds a row with no baseline and no target.
func (b *bench) info(section, name string, value figure, note string) {
	b.rows = append(b.rows, row{Section: section, Figure: name, Value: value.v, Unit: value.unit, Verdict: "-", Note: note})
	b.logf("  %s: %s %s", name, value, note)
}

func ratioText(r float64) string {
	switch {
	case r == 0:
		return ""
	case r < 0.1:
		return fmt.Sprintf("%.3fx", r)
	}
	return fmt.Sprintf("%.2fx", r)
}

// Target checks.
func atMost(x float64) func(v, base float64) bool {
	return func(v, base float64) bool { return v <= x*base }
}
func atLeast(x float64) func(v, base float64) bool {
	return func(v, base float64) bool { return v >= x*base }
}

func plusAtMost(extraMs float64) func(v, base float64) bool {
	return func(v, base float64) bool { return v <= base+extraMs }
}

// environment is what the JSON says about the machine and the build.
type environment struct {
	Date      string `json:"date"`
	Cores     int    `json:"cores"`
	LoadAvg   string `json:"loadAverage"`
	Go        string `json:"go"`
	Helm      string `json:"helm"`
	ClientGo  string `json:"clientGo"`
	Server    string `json:"kubernetes"`
	Commit    string `json:"commit"`
	Quick     bool   `json:"quick"`
	Arguments string `json:"arguments"`
}

func (b *bench) environment() environment {
	e := environment{Date: time.Now().UTC().Format(time.RFC3339), Cores: runtime.NumCPU(), LoadAvg: loadAvg(),
		Go: runtime.Version(), Quick: b.o.quick, Arguments: strings.Join(os.Args[1:], " ")}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			switch m.Path {
			case "helm.sh/helm/v3":
				e.Helm = m.Version
			case "k8s.io/client-go":
				e.ClientGo = m.Version
			}
		}
	}
	if v, err := b.cl.Typed.Discovery().ServerVersion(); err == nil {
		e.Server = v.GitVersion
	}
	if out, err := exec.Command("git", "rev-parse", "HEAD").Output(); err == nil {
		e.Commit = strings.TrimSpace(string(out))
		if st, err := exec.Command("git", "status", "--porcelain", "--untracked-files=no").Output(); err == nil && len(st) > 0 {
			e.Commit += "+dirty"
		}
	}
	return e
}

func loadAvg() string {
	s, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(s))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// report prints the table and writes it as JSON.
func (b *bench) report() error {
	env := b.environment()
	fmt.Printf("\n%s, %d cores, load average %s (at the start: %s), Go %s, Helm %s, Kubernetes %s, commit %.12s\n\n",
		env.Date, env.Cores, env.LoadAvg, b.loadAtStart, env.Go, env.Helm, env.Server, env.Commit)
	fmt.Println("| figure | measured | floor / baseline (same run) | ratio | target | verdict |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, r := range b.rows {
		measured := figure{r.Value, r.Unit}.String()
		if r.Note != "" {
			measured += " (" + r.Note + ")"
		}
		base := ""
		if r.Baseline != "" {
			base = r.Baseline + " " + figure{r.Base, r.Unit}.String()
		}
		fmt.Printf("| %s | %s | %s | %s | %s | %s |\n", r.Figure, measured, base, ratioText(r.Ratio), r.Target, r.Verdict)
	}
	if err := os.MkdirAll(b.o.out, 0o755); err != nil {
		return err
	}
	path := filepath.Join(b.o.out, "bench-"+time.Now().UTC().Format("20060102T150405Z")+".json")
	out, err := json.MarshalIndent(struct {
		Environment environment `json:"environment"`
		LoadAtStart string      `json:"loadAverageAtStart"`
		Rows        []row       `json:"rows"`
	}{env, b.loadAtStart, b.rows}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(path, out, 0o644); err != nil {
		return err
	}
	fmt.Printf("\nwritten to %s\n", path)
	return nil
}
