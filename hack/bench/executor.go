package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"

	"helm.sh/helm/v3/pkg/chartutil"
)

// capturedEvent is an accepted event as submit sent it (binary mode).
type capturedEvent struct {
	header http.Header
	body   []byte
}

// executorSection: the executor's time from the accepted event to deployed against
// `helm install --wait` of the same chart, both warm (executor running, chart cached; CLI
// given the archive on disk) and both cold (a fresh executor process, started before the
// clock; the CLI given the chart's URL with an empty cache), alternating which goes first.
// Neither side waits for readiness (no --wait): Helm polls readiness every 2 s, which
// would quantize both to 2 s steps and hide the difference (the e2e section waits).
func (b *bench) executorSection(ctx context.Context) error {
	ns, cleanup, err := b.namespace(ctx, "exec")
	if err != nil {
		return err
	}
	defer cleanup()
	var mu sync.Mutex
	captured := map[string]capturedEvent{}
	submit, _, stop, err := b.submitWithSink(func(r *http.Request, body []byte) {
		mu.Lock()
		captured[r.Header.Get("Ce-Subject")] = capturedEvent{r.Header.Clone(), body}
		mu.Unlock()
	})
	if err != nil {
		return err
	}
	defer stop()
	c := newSubmitClient(submit.URL, b.token, 1)
	gc, err := knativeGCEnv("executor")
	if err != nil {
		return err
	}
	e := &execBench{b: b, ns: ns, submit: c, env: gc, captured: func(key string) (capturedEvent, bool) {
		mu.Lock()
		defer mu.Unlock()
		ev, ok := captured[key]
		return ev, ok
	}}
	defer e.close()
	warmExec, err := b.start("executor", 0, e.env...)
	if err != nil {
		return err
	}
	defer warmExec.Stop()
	e.warm = warmExec
	tiny := execChart{name: "tiny", version: "0.1.0", values: map[string]any{"message": "bench"}, runs: b.o.execRuns}
	if err := e.install(ctx, warmExec, tiny, "warmup"); err != nil {
		return err
	}
	gitlabValues, err := chartutil.ReadValuesFile(filepath.Join(b.o.charts, "gitlab-values-offline.yaml"))
	if err != nil {
		return err
	}
	// As the e2e test installs it: one webservice pod, the ingress controller a NodePort.
	gitlabValues["nginx-ingress"] = map[string]any{"controller": map[string]any{"service": map[string]any{"type": "NodePort"}}}
	if g, ok := gitlabValues["gitlab"].(map[string]any); ok {
		g["webservice"] = map[string]any{"minReplicas": 1}
	}
	gitlab := execChart{name: "gitlab", version: "6.5.4", values: gitlabValues, runs: b.o.gitlabRuns, timeout: "10m", trimDeps: true}
	charts := []execChart{tiny}
	if gitlab.runs > 0 {
		if err := e.cliArchive(gitlab); err != nil {
			return fmt.Errorf("GitLab for the CLI: %w", err)
		}
		// The warm executor's chart cache holds GitLab before its warm runs.
		if err := e.install(ctx, warmExec, gitlab, "gitlabwarmup"); err != nil {
			return fmt.Errorf("GitLab warm-up: %w", err)
		}
		charts = append(charts, gitlab)
	}
	for _, ch := range charts {
		for _, mode := range []string{"warm", "cold"} {
			if err := e.compare(ctx, ch, mode); err != nil {
				return fmt.Errorf("%s %s: %w", ch.name, mode, err)
			}
		}
	}
	return nil
}
