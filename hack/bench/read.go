package main

import (
	"context"
	"fmt"
	"net/url"
	"os/exec"
	"path/filepath"
	"time"

	"helm.sh/helm/v3/pkg/chart/loader"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// readSection: GET /api/helm/releases?limitInfo=true of a namespace holding 100, 1,000 and
// 10,000 releases (records as Helm writes them: the tiny chart with its templates, a
// manifest, values), p50/p99 and submit's RSS, against `helm list -a` of the same namespace.
func (b *bench) readSection(ctx context.Context) error {
	s, err := newSink(nil)
	if err != nil {
		return err
	}
	defer s.close()
	p, err := b.submitProc(s.url)
	if err != nil {
		return err
	}
	defer p.Stop()
	c := newSubmitClient(p.URL, b.token, 1)
	for _, size := range b.o.listSizes {
		if err := b.listSize(ctx, c, p.Pid(), size); err != nil {
			return err
		}
	}
	return nil
}

func (b *bench) listSize(ctx context.Context, c *submitClient, pid, size int) error {
	ns, cleanup, err := b.namespace(ctx, "read")
	if err != nil {
		return err
	}
	defer cleanup()
	t0 := time.Now()
	if err := b.helmRecords(ctx, ns, size); err != nil {
		return err
	}
	b.logf("  %d release records written in %s", size, time.Since(t0).Round(time.Millisecond))
	path := api.PathList + "?" + url.Values{"ns": {ns}, "limitInfo": {"true"}}.Encode()
	// The first list after the records were written decodes every latest revision (and
	// warms the access check): reported on its own.
	var first time.Duration
	if err := b.retryNamespace(ctx, func() error {
		t0 := time.Now()
		err := c.get(ctx, path)
		first = time.Since(t0)
		return err
	}); err != nil {
		return err
	}
	ours := closedLoop(b.o.listRuns, 1, func(int) error { return c.get(ctx, path) })
	rss, hwm := procMem(pid)
	runs := max(3, b.o.listRuns/4)
	helm := closedLoop(runs, 1, func(int) error {
		out, err := exec.CommandContext(ctx, b.o.helm, "list", "-a", "-n", ns, "--max", "0").CombinedOutput()
		if err != nil {
			return fmt.Errorf("helm list: %v: %.300s", err, out)
		}
		return nil
	})
	if helm.ok != helm.n {
		return helm.firstErr
	}
	const sec = "read"
	name := fmt.Sprintf("list %d releases, limitInfo", size)
	b.compare(sec, name+": p50", msF(ours.p50), "helm list -a p50", msF(helm.p50), "", nil, ours.note())
	var check func(v, base float64) bool
	target := ""
	if size >= 10000 {
		check, target = atMost(0.2), "<= 0.2x"
	}
	b.compare(sec, name+": p99", msF(ours.p99), fmt.Sprintf("helm list -a p99 (n=%d)", helm.n), msF(helm.p99), target, check, "")
	b.compare(sec, name+": first list (no record decoded yet)", msF(first), "helm list -a p50", msF(helm.p50), "", nil, "")
	b.info(sec, fmt.Sprintf("submit RSS after listing %d releases", size), mibF(rss), fmt.Sprintf("peak %d MiB", hwm>>20))
	return nil
}

// helmRecords writes n deployed releases of the tiny chart through Helm's own Secrets driver.
func (b *bench) helmRecords(ctx context.Context, ns string, n int) error {
	ch, err := loader.Load(filepath.Join(b.charts.Dir, "tiny-0.1.0.tgz"))
	if err != nil {
		return err
	}
	d := storage.NewSecrets(b.cl.Typed.CoreV1().Secrets(ns))
	now := helmtime.Now()
	return parallel(n, 32, func(i int) error {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		name := fmt.Sprintf("r%d", i)
		rel := &helmrelease.Release{Name: name, Namespace: ns, Version: 1, Chart: ch,
			Config:   map[string]any{"message": "bench"},
			Info:     &helmrelease.Info{FirstDeployed: now, LastDeployed: now, Status: helmrelease.StatusDeployed, Description: "Install complete"},
			Manifest: fmt.Sprintf("---\n# Source: tiny/templates/all.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s-config\ndata:\n  message: \"bench\"\n", name)}
		return d.Create(release.SecretName(name, 1), rel)
	})
}
