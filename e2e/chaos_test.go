package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/async-helm/async-helm/internal/chaos"
	"github.com/async-helm/async-helm/internal/localstack"
	"github.com/async-helm/async-helm/internal/testcharts"
)

// A short `make chaos`: executor SIGKILLs during installs, concurrent upgrades, a sink outage,
// bursts (one with an executor SIGKILL), a burst above the admission bound, and a burst
// through 2 submits, 3 executors and 2 notifiers with one executor and one notifier killed.
func TestChaosShort(t *testing.T) {
	t.Parallel()
	charts := testcharts.Start(t)
	rep, err := chaos.Run(context.Background(), chaos.Config{
		Bins:       bins,
		Kubeconfig: cluster.Kubeconfig,
		Knative:    local,
		ConfigDir:  filepath.Join(root, "config", "knative"),
		ChartURL:   charts.ChartURL("tiny", "0.1.0"),
		LogDir:     chaosLogDir(t),
		Installs:   10, Kills: 3, Upgrades: 15, Releases: 3,
		Outage: 3 * time.Second, Timeout: 5 * time.Minute,
		Burst: 80, BurstClients: 16, BurstKills: 1, OverBound: 120, Bound: 15,
		Scale: 100, ScaleCounts: localstack.Counts{Submit: 2, Executor: 3, Notifier: 2},
		Logf: t.Logf,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range rep.Lines {
		t.Log(l)
	}
	for _, v := range rep.Violations {
		t.Error(v)
	}
	if len(rep.Lines) != 7 {
		t.Errorf("%d scenarios ran, want 7", len(rep.Lines))
	}
}

// chaosLogDir is where the stacks' processes log: CHAOS_LOG_DIR when set (kept after the
// test, to read a failure's executor logs), else the test's temporary directory.
func chaosLogDir(t *testing.T) string {
	dir := os.Getenv("CHAOS_LOG_DIR")
	if dir == "" {
		return t.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Logf("process logs in %s", dir)
	return dir
}
