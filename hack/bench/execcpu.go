package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/async-helm/async-helm/internal/proc"
	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// execChart is a chart the executor section installs both ways.
type execChart struct {
	name, version string
	values        map[string]any
	runs          int
	timeout       string // the install's timeout; 2m when empty
	trimDeps      bool   // the CLI gets cliArchive's copy
}

// execBench installs through the executor (an event submit accepted, delivered to it
// directly) and with the helm CLI, timing both and taking each one's CPU.
type execBench struct {
	b        *bench
	ns       string
	submit   *submitClient
	env      []string // the executor's GC settings, as config/knative sets them
	captured func(key string) (capturedEvent, bool)
	warm     *proc.Process
	cleanups []func()
}

// measured is one install: its time and the CPU it cost the process that did it.
type measured struct{ d, cpu time.Duration }

// cliName is the archive the CLI installs: the chart itself, or (cliArchive) a copy whose
// Chart.yaml lists only the dependencies it contains.
func (ch execChart) cliName() string {
	if ch.trimDeps {
		return ch.name + "-cli"
	}
	return ch.name
}

// cliArchive writes, beside the served charts, ch's archive with the dependencies it does
// not contain taken off its Chart.yaml: the helm CLI refuses a chart that lists a dependency
// missing from charts/ even when the values disable it (Helm's SDK and the executor render
// it), and GitLab 6.5.4's testdata archive ships without its disabled ones.
func (e *execBench) cliArchive(ch execChart) error {
	c, err := loader.Load(filepath.Join(e.b.charts.Dir, ch.name+"-"+ch.version+".tgz"))
	if err != nil {
		return err
	}
	have := map[string]bool{}
	for _, d := range c.Dependencies() {
		have[d.Name()] = true
	}
	var deps []*chart.Dependency
	for _, d := range c.Metadata.Dependencies {
		if have[d.Name] {
			deps = append(deps, d)
		}
	}
	c.Metadata.Dependencies, c.Lock = deps, nil
	// An apiVersion v1 chart lists them in requirements.yaml, which the loader reads again.
	files := c.Files[:0]
	for _, f := range c.Files {
		if f.Name != "requirements.yaml" && f.Name != "requirements.lock" {
			files = append(files, f)
		}
	}
	c.Files = files
	dir, err := os.MkdirTemp("", "bench-cli-chart")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	saved, err := chartutil.Save(c, dir)
	if err != nil {
		return err
	}
	return os.Rename(saved, filepath.Join(e.b.charts.Dir, ch.cliName()+"-"+ch.version+".tgz"))
}

func (ch execChart) timeoutOr() string {
	if ch.timeout == "" {
		return "2m"
	}
	return ch.timeout
}

// nsFor is where an install of ch goes: GitLab's fixed-name objects want a namespace per
// release, tiny shares the section's.
func (e *execBench) nsFor(ctx context.Context, ch execChart) (string, error) {
	if ch.name == "tiny" {
		return e.ns, nil
	}
	ns, cleanup, err := e.b.namespace(ctx, "execgl")
	if err != nil {
		return "", err
	}
	e.cleanups = append(e.cleanups, func() { cleanup(); e.b.deleteClusterScoped(ns) })
	return ns, nil
}

// close deletes the namespaces made for single installs.
func (e *execBench) close() {
	for _, f := range e.cleanups {
		f()
	}
}

// reserve has submit reserve a revision and returns the event it sent.
func (e *execBench) reserve(ctx context.Context, ch execChart, ns, name string) (capturedEvent, error) {
	err := e.b.retryNamespace(ctx, func() error {
		return e.submit.install(ctx, api.ReleaseRequest{Name: name, Namespace: ns, ChartURL: e.b.charts.ChartURL(ch.name, ch.version),
			Values: ch.values, Timeout: ch.timeoutOr()})
	})
	if err != nil {
		return capturedEvent{}, err
	}
	// Once the sink has answered, submit sends the event behind the 201 (events.Handoff).
	var ev capturedEvent
	if !testwait.Until(10*time.Second, func() bool {
		var ok bool
		ev, ok = e.captured(ns + "/" + name)
		return ok
	}) {
		return ev, fmt.Errorf("submit accepted %s but sent no event within 10 s", name)
	}
	return ev, nil
}

// deliver posts the event to the executor and checks the revision is deployed; the CPU is
// the executor's and its render workers' (procTreeCPU) from the post to its answer.
func (e *execBench) deliver(ctx context.Context, executor *proc.Process, ns, name string, ev capturedEvent) (measured, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, executor.URL, bytes.NewReader(ev.body))
	if err != nil {
		return measured{}, err
	}
	req.Header = ev.header.Clone()
	cpu0, t0 := procTreeCPU(executor.Pid()), time.Now()
	resp, err := http.DefaultClient.Do(req)
	m := measured{d: time.Since(t0), cpu: procTreeCPU(executor.Pid()) - cpu0}
	if err != nil {
		return m, err
	}
	msg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return m, fmt.Errorf("executor answered %d for %s: %s", resp.StatusCode, name, msg)
	}
	sec, err := e.b.cl.Typed.CoreV1().Secrets(ns).Get(ctx, release.SecretName(name, 1), metav1.GetOptions{})
	if err != nil {
		return m, err
	}
	if st := sec.Labels[release.LabelStatus]; st != "deployed" {
		return m, fmt.Errorf("%s is %s after the executor answered: %s", name, st, msg)
	}
	return m, nil
}

// install reserves and delivers one install of ch to executor.
func (e *execBench) install(ctx context.Context, executor *proc.Process, ch execChart, name string) error {
	ns, err := e.nsFor(ctx, ch)
	if err != nil {
		return err
	}
	ev, err := e.reserve(ctx, ch, ns, name)
	if err != nil {
		return err
	}
	_, err = e.deliver(ctx, executor, ns, name, ev)
	return err
}

// cli is `helm install` of the same chart and values: warm with the archive on disk, cold
// with an empty cache and the chart's URL. Its CPU is the process's own (rusage).
func (e *execBench) cli(ctx context.Context, ch execChart, ns, name string, cold bool) (measured, error) {
	dir, err := os.MkdirTemp("", "bench-helm")
	if err != nil {
		return measured{}, err
	}
	defer os.RemoveAll(dir)
	vals, err := yaml.Marshal(ch.values)
	if err != nil {
		return measured{}, err
	}
	valuesFile := filepath.Join(dir, "values.yaml")
	if err := os.WriteFile(valuesFile, vals, 0o600); err != nil {
		return measured{}, err
	}
	chart := filepath.Join(e.b.charts.Dir, ch.cliName()+"-"+ch.version+".tgz")
	if cold {
		chart = e.b.charts.ChartURL(ch.cliName(), ch.version)
	}
	cmd := exec.CommandContext(ctx, e.b.o.helm, "install", name, chart, "-n", ns, "-f", valuesFile, "--timeout", ch.timeoutOr())
	if cold {
		// An empty HOME too: client-go keeps discovery under ~/.kube/cache, and a CLI that
		// finds it there skips the discovery a cold executor pays for.
		cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+filepath.Join(dir, "cache"), "HOME="+dir)
	}
	t0 := time.Now()
	out, err := cmd.CombinedOutput()
	m := measured{d: time.Since(t0)}
	if cmd.ProcessState != nil {
		m.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	if err != nil {
		return m, fmt.Errorf("helm install %s: %v: %s", name, err, out)
	}
	return m, nil
}

// compare runs ch.runs installs each way in mode (warm or cold), order alternated, and adds
// the time and CPU rows.
func (e *execBench) compare(ctx context.Context, ch execChart, mode string) error {
	var ours, theirs []sample
	var ourCPU, theirCPU time.Duration
	for i := 0; i < ch.runs; i++ {
		name := fmt.Sprintf("%s%s%d", ch.name, mode, i)
		ns, err := e.nsFor(ctx, ch)
		if err != nil {
			return err
		}
		ev, err := e.reserve(ctx, ch, ns, name)
		if err != nil {
			return err
		}
		executor := e.warm
		if mode == "cold" {
			if executor, err = e.b.start("executor", 0, e.env...); err != nil {
				return err
			}
		}
		runOurs := func() error {
			m, err := e.deliver(ctx, executor, ns, name, ev)
			ours, ourCPU = append(ours, sample{d: m.d}), ourCPU+m.cpu
			return err
		}
		runTheirs := func() error {
			m, err := e.cli(ctx, ch, ns, "cli"+name, mode == "cold")
			theirs, theirCPU = append(theirs, sample{d: m.d}), theirCPU+m.cpu
			return err
		}
		first, second := runOurs, runTheirs
		if i%2 == 1 {
			first, second = runTheirs, runOurs
		}
		err = first()
		if err == nil {
			err = second()
		}
		if mode == "cold" {
			executor.Stop()
		}
		if err != nil {
			return err
		}
	}
	e.rows(ch, mode, ours, theirs, ourCPU, theirCPU)
	return nil
}

func (e *execBench) rows(ch execChart, mode string, ours, theirs []sample, ourCPU, theirCPU time.Duration) {
	o, t := summarize(ours, 0), summarize(theirs, 0)
	how := map[bool]string{true: "fresh executor per run, started before the clock; CLI with an empty cache and the chart's URL",
		false: "CLI with the archive on disk"}[mode == "cold"]
	label := "executor " + mode
	if ch.name != "tiny" {
		label = fmt.Sprintf("executor %s, %s %s", mode, ch.name, ch.version)
	}
	if ch.name == "tiny" {
		e.b.compare("executor", label+": accepted event to deployed p50 (no wait)", msF(o.p50), "helm install p50", msF(t.p50), "", nil, o.note())
	}
	e.b.compare("executor", label+": accepted event to deployed p99 (no wait)", msF(o.p99), "helm install p99", msF(t.p99), "", nil,
		"order alternated; "+how)
	e.b.compare("executor", label+": CPU per install", figure{msPer(ourCPU, len(ours)), cpuMs},
		"helm install process CPU", figure{msPer(theirCPU, len(theirs)), cpuMs}, "<= 0.5x", atMost(0.5),
		fmt.Sprintf("n=%d each; the executor's CPU with its render workers' from the delivery to its answer, the CLI's rusage", len(ours)))
}

// deleteClusterScoped removes the cluster-scoped objects a chart installed into ns made
// (GitLab's ClusterRoles and bindings named after the release): deleting ns leaves them.
func (b *bench) deleteClusterScoped(ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rbac := b.cl.Typed.RbacV1()
	const owner = "meta.helm.sh/release-namespace"
	if crs, err := rbac.ClusterRoles().List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range crs.Items {
			if o.Annotations[owner] == ns {
				_ = rbac.ClusterRoles().Delete(ctx, o.Name, metav1.DeleteOptions{})
			}
		}
	}
	if crbs, err := rbac.ClusterRoleBindings().List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range crbs.Items {
			if o.Annotations[owner] == ns {
				_ = rbac.ClusterRoleBindings().Delete(ctx, o.Name, metav1.DeleteOptions{})
			}
		}
	}
	if ics, err := b.cl.Typed.NetworkingV1().IngressClasses().List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range ics.Items {
			if o.Annotations[owner] == ns {
				_ = b.cl.Typed.NetworkingV1().IngressClasses().Delete(ctx, o.Name, metav1.DeleteOptions{})
			}
		}
	}
}
