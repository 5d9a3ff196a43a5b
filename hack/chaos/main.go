// Command chaos is `make chaos`: an executor killed during installs, concurrent upgrades,
// a sink outage, bursts, and a burst through 2 submits, 3 executors and 2 notifiers with one
// executor and one notifier killed (docs/chaos.md). It prints counts and exits non-zero on
// any violation.
package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/async-helm/async-helm/internal/chaos"
	"github.com/async-helm/async-helm/internal/eventing"
	"github.com/async-helm/async-helm/internal/localstack"
	"github.com/async-helm/async-helm/internal/testchartrepo"
)

func main() {
	cfg := chaos.Config{Kubeconfig: os.Getenv("KUBECONFIG"), Logf: func(f string, a ...any) { fmt.Fprintf(os.Stderr, f+"\n", a...) }}
	bin := flag.String("bin", "bin", "built functions")
	flag.IntVar(&cfg.Installs, "installs", 50, "installs while the executor is killed")
	flag.IntVar(&cfg.Kills, "kills", 10, "SIGKILLs of the executor")
	flag.IntVar(&cfg.Upgrades, "upgrades", 50, "concurrent upgrades of one release")
	flag.IntVar(&cfg.Releases, "releases", 10, "installs while the sink is down")
	flag.DurationVar(&cfg.Outage, "outage", 10*time.Second, "sink outage")
	flag.IntVar(&cfg.Burst, "burst", 1000, "installs in each burst (0: no bursts)")
	flag.IntVar(&cfg.BurstClients, "burst-clients", 50, "concurrent clients of a burst")
	flag.IntVar(&cfg.BurstKills, "burst-kills", 2, "SIGKILLs of the executor during the second burst")
	flag.IntVar(&cfg.OverBound, "over-bound", 600, "installs against the admission bound")
	flag.IntVar(&cfg.Bound, "bound", 100, "MAX_QUEUED_PER_NAMESPACE of the admission run")
	flag.IntVar(&cfg.Counts.Submit, "submits", 1, "instances of submit in the scenarios before -scale (make chaos SUBMITS=N)")
	flag.IntVar(&cfg.Counts.Executor, "executors", 1, "instances of the executor in the scenarios before -scale (make chaos EXECUTORS=N)")
	flag.IntVar(&cfg.Counts.Notifier, "notifiers", 1, "instances of the notifier in the scenarios before -scale (make chaos NOTIFIERS=N)")
	flag.IntVar(&cfg.Scale, "scale", 1000, "installs of the burst through several instances of each function (0: none)")
	flag.IntVar(&cfg.ScaleCounts.Submit, "scale-submits", 2, "submits of the -scale burst")
	flag.IntVar(&cfg.ScaleCounts.Executor, "scale-executors", 3, "executors of the -scale burst (one is SIGKILLed and restarted)")
	flag.IntVar(&cfg.ScaleCounts.Notifier, "scale-notifiers", 2, "notifiers of the -scale burst (one is SIGKILLed for good)")
	flag.IntVar(&cfg.ScaleSlots, "scale-slots", 0, "MAX_PARALLEL of each executor of the -scale burst (0: 64 / executors)")
	flag.DurationVar(&cfg.ScaleWait, "scale-wait", 10*time.Minute, "each install's timeout (Helm's --timeout) in the -scale burst")
	flag.DurationVar(&cfg.Timeout, "timeout", 15*time.Minute, "time for everything to end, per scenario")
	only := flag.String("scenarios", strings.Join(chaos.ScenarioNames(), ","), "the scenarios to run")
	flag.Parse()
	cfg.Scenarios = strings.Split(*only, ",")
	cfg.Bins = localstack.Bins(*bin)
	if err := run(cfg); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

func run(cfg chaos.Config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	dir, err := os.MkdirTemp("", "chaos")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	charts, err := testchartrepo.Start("testdata/charts", dir, ln)
	if err != nil {
		return err
	}
	cfg.ChartURL = charts.ChartURL("tiny", "0.1.0")
	cfg.LogDir = ".cache/chaos"
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	if cfg.Knative, err = eventing.Open(eventing.Dir(root), cfg.Kubeconfig); err != nil {
		return err
	}
	cfg.ConfigDir = filepath.Join(root, "config", "knative")
	if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
		return err
	}
	rep, err := chaos.Run(ctx, cfg)
	if err != nil {
		return err
	}
	for _, l := range rep.Lines {
		fmt.Println(l)
	}
	for _, v := range rep.Violations {
		fmt.Println("VIOLATION:", v)
	}
	fmt.Printf("%d scenarios, %d violations (logs in %s/)\n", len(rep.Lines), len(rep.Violations), cfg.LogDir)
	if len(rep.Violations) > 0 {
		return fmt.Errorf("%d violations", len(rep.Violations))
	}
	return nil
}
