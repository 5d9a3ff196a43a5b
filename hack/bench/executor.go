package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/proc"
	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
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
	chartURL := b.charts.ChartURL("tiny", "0.1.0")
	// reserve has submit reserve a revision and returns the event it sent.
	reserve := func(name string) (capturedEvent, error) {
		err := b.retryNamespace(ctx, func() error {
			return c.install(ctx, api.ReleaseRequest{Name: name, Namespace: ns, ChartURL: chartURL,
				Values: map[string]any{"message": "bench"}, Timeout: "2m"})
		})
		if err != nil {
			return capturedEvent{}, err
		}
		// Once the sink has answered, submit sends the event behind the 201 (events.Handoff).
		var e capturedEvent
		sent := testwait.Until(10*time.Second, func() bool {
			mu.Lock()
			defer mu.Unlock()
			var ok bool
			e, ok = captured[ns+"/"+name]
			return ok
		})
		if !sent {
			return e, fmt.Errorf("submit accepted %s but sent no event within 10 s", name)
		}
		return e, nil
	}
	deliver := func(executor *proc.Process, name string, e capturedEvent) (time.Duration, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, executor.URL, bytes.NewReader(e.body))
		if err != nil {
			return 0, err
		}
		req.Header = e.header.Clone()
		t0 := time.Now()
		resp, err := http.DefaultClient.Do(req)
		d := time.Since(t0)
		if err != nil {
			return 0, err
		}
		msg, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return 0, fmt.Errorf("executor answered %d for %s: %s", resp.StatusCode, name, msg)
		}
		sec, err := b.cl.Typed.CoreV1().Secrets(ns).Get(ctx, release.SecretName(name, 1), metav1.GetOptions{})
		if err != nil {
			return 0, err
		}
		if st := sec.Labels[release.LabelStatus]; st != "deployed" {
			return 0, fmt.Errorf("%s is %s after the executor answered: %s", name, st, msg)
		}
		return d, nil
	}
	cli := func(name string, cold bool) (time.Duration, error) {
		chart := b.charts.Dir + "/tiny-0.1.0.tgz"
		cmd := exec.CommandContext(ctx, b.o.helm, "install", name, chart, "-n", ns, "--set", "message=bench", "--timeout", "2m")
		if cold {
			cache, err := os.MkdirTemp("", "bench-helm-cache")
			if err != nil {
				return 0, err
			}
			defer os.RemoveAll(cache)
			cmd.Args[3] = chartURL
			cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+cache)
		}
		t0 := time.Now()
		out, err := cmd.CombinedOutput()
		if err != nil {
			return 0, fmt.Errorf("helm install %s: %v: %s", name, err, out)
		}
		return time.Since(t0), nil
	}

	warmExec, err := b.start("executor", 0)
	if err != nil {
		return err
	}
	defer warmExec.Stop()
	if e, err := reserve("warmup"); err != nil {
		return err
	} else if _, err := deliver(warmExec, "warmup", e); err != nil {
		return err
	}
	for _, mode := range []string{"warm", "cold"} {
		var ours, theirs []sample
		for i := 0; i < b.o.execRuns; i++ {
			name := fmt.Sprintf("%s%d", mode, i)
			e, err := reserve(name)
			if err != nil {
				return err
			}
			executor := warmExec
			if mode == "cold" {
				if executor, err = b.start("executor", 0); err != nil {
					return err
				}
			}
			runOurs := func() error {
				d, err := deliver(executor, name, e)
				ours = append(ours, sample{d: d})
				return err
			}
			runTheirs := func() error {
				d, err := cli("cli"+name, mode == "cold")
				theirs = append(theirs, sample{d: d})
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
		o, t := summarize(ours, 0), summarize(theirs, 0)
		b.compare("executor", fmt.Sprintf("executor %s: accepted event to deployed p50 (no wait)", mode), msF(o.p50), "helm install p50", msF(t.p50), "", nil, o.note())
		b.compare("executor", fmt.Sprintf("executor %s: accepted event to deployed p99 (no wait)", mode), msF(o.p99), "helm install p99", msF(t.p99), "", nil,
			strings.TrimSpace(fmt.Sprintf("order alternated; %s", map[bool]string{true: "fresh executor per run, started before the clock; CLI with an empty cache and the chart's URL", false: "CLI with the archive on disk"}[mode == "cold"])))
	}
	return nil
}
