package helmexec

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/kube"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// slowChart renders in about a second on a quiet machine: long enough to pass a short
// render bound, at which its worker is killed.
func slowChart() *chart.Chart {
	ch := tiny("1.0.0")
	ch.Templates = append(ch.Templates, &chart.File{Name: "templates/slow.yaml",
		Data: []byte(`{{ range until 2000 }}{{ range until 6000 }}{{ end }}{{ end }}`)})
	return ch
}

// recordingKube counts the cluster writes Helm makes.
type recordingKube struct {
	kubefake.PrintingKubeClient
	mu      sync.Mutex
	creates int
	// block, when set, holds Wait until closed (the action's "waiting" phase).
	block, waiting chan struct{}
}

func (k *recordingKube) Create(r kube.ResourceList) (*kube.Result, error) {
	k.mu.Lock()
	k.creates++
	k.mu.Unlock()
	return k.PrintingKubeClient.Create(r)
}

func (k *recordingKube) Wait(r kube.ResourceList, d time.Duration) error {
	if k.block != nil {
		close(k.waiting)
		<-k.block
	}
	return nil
}

func (k *recordingKube) created() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.creates
}

// copying stores a copy of what is written, as the Secrets driver does (Helm's memory driver
// keeps the pointer, so Helm's later changes to its object would show without a write).
type copying struct{ storage.Driver }

func clone(t *testing.T, rls *helmrelease.Release) *helmrelease.Release {
	b, err := json.Marshal(rls)
	if err != nil {
		t.Fatal(err)
	}
	var out helmrelease.Release
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}

func copyingOption(t *testing.T) Option {
	return WithStorageWrapper(func(d storage.Driver) storage.Driver { return &copyingDriver{Driver: d, t: t} })
}

type copyingDriver struct {
	storage.Driver
	t *testing.T
}

func (c *copyingDriver) Create(key string, rls *helmrelease.Release) error {
	return c.Driver.Create(key, clone(c.t, rls))
}

func (c *copyingDriver) Update(key string, rls *helmrelease.Release) error {
	return c.Driver.Update(key, clone(c.t, rls))
}

func waitOrphansGone(t *testing.T, o *Orphans) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for o.Count() > 0 {
		if time.Now().After(deadline) {
			t.Fatal("the orphaned Helm goroutine never returned")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A render past the bound fails the action at the bound: its worker is killed, nothing of
// it goes on in this process, and it neither adopted the reservation nor created anything.
func TestRenderBoundEndsTheAction(t *testing.T) {
	f, mem, opts := offline(t)
	kc := &recordingKube{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}}
	orphans := &Orphans{}
	opts = append(opts, WithKubeClient(kc), WithFence(&Fence{Orphans: orphans}), copyingOption(t))
	reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
	_, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: slowChart(),
		Labels: release.Labels("r1", 1, "tiny", "1.0.0"), RenderTimeout: 100 * time.Millisecond}, opts...)
	if !errors.Is(err, ErrRenderTimeout) {
		t.Fatalf("install = %v; want ErrRenderTimeout at the bound", err)
	}
	if n := orphans.Count(); n != 0 {
		t.Fatalf("orphans = %d, want none: the render was the worker's", n)
	}
	if st := get(t, mem, "web", 1).Info.Status; st != helmrelease.StatusPendingInstall {
		t.Errorf("the render wrote %s; the record must be left to the executor", st)
	}
	if n := kc.created(); n != 0 {
		t.Errorf("the action created %d resource lists", n)
	}
}

// Helm's install goes on in its own goroutine after its context ends; once the action
// ended, its "deployed" write (and its own failure write) is refused.
func TestEndedInstallNeverWritesDeployed(t *testing.T) {
	f, mem, opts := offline(t)
	kc := &recordingKube{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard},
		block: make(chan struct{}), waiting: make(chan struct{})}
	orphans := &Orphans{}
	fence := &Fence{Orphans: orphans}
	opts = append(opts, WithKubeClient(kc), WithFence(fence), copyingOption(t))
	reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
	c, cancel := context.WithCancel(ctx(t))
	go func() {
		<-kc.waiting // Helm applied the manifest and waits for it
		fence.End()  // as the executor does, before the cancel
		cancel()
	}()
	_, err := f.Install(c, Request{Namespace: "ns", Name: "web", Revision: 1, Chart: tiny("1.0.0"), Wait: true,
		Timeout: time.Minute, Labels: release.Labels("r1", 1, "tiny", "1.0.0")}, opts...)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("install = %v, want context.Canceled", err)
	}
	if n := orphans.Count(); n != 1 {
		t.Fatalf("orphans = %d, want Helm's waiting goroutine counted", n)
	}
	close(kc.block) // the wait ends: Helm goes on to record "deployed"
	waitOrphansGone(t, orphans)
	if st := get(t, mem, "web", 1).Info.Status; st == helmrelease.StatusDeployed {
		t.Fatalf("Helm's background goroutine wrote %s after the action ended", st)
	}
}

// A rollback (no context in Helm) ends at ctx's end and is fenced off too.
func TestEndedRollbackReturnsAtOnce(t *testing.T) {
	f, mem, opts := offline(t)
	installTwice(t, f, mem, append(opts, copyingOption(t)))
	kc := &recordingKube{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard},
		block: make(chan struct{}), waiting: make(chan struct{})}
	orphans := &Orphans{}
	fence := &Fence{Orphans: orphans}
	opts = append(opts, WithKubeClient(kc), WithFence(fence), copyingOption(t))
	reserve(t, mem, "web", 3, helmrelease.StatusPendingRollback)
	c, cancel := context.WithCancel(ctx(t))
	go func() {
		<-kc.waiting
		fence.End()
		cancel()
	}()
	_, err := f.Rollback(c, Request{Namespace: "ns", Name: "web", Revision: 3, RollbackTo: 1, Wait: true, RollbackPin: pinOf(t, mem, 1),
		Timeout: time.Minute, Labels: release.Labels("r3", 3, "tiny", "1.0.0")}, opts...)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("rollback = %v, want context.Canceled", err)
	}
	close(kc.block)
	waitOrphansGone(t, orphans)
	if st := get(t, mem, "web", 3).Info.Status; st == helmrelease.StatusDeployed {
		t.Fatalf("the rollback wrote %s after it ended", st)
	}
}
