package executor

import (
	"context"
	"strings"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// cancelWhileLost leaves revision 1's Lease as a lost executor would, with a cancel asked
// by by on it, expired.
func (e *env) cancelWhileLost(name, by string) {
	e.t.Helper()
	dead := &lease.Heartbeat{Client: e.c, Holder: "dead", Duration: time.Minute, Clock: e.clock}
	if h, err := dead.Hold(ctx(e.t), "ns", release.LeaseName(name, 1)); h == nil || err != nil {
		e.t.Fatal(h, err)
	}
	patch := `{"metadata":{"annotations":{"` + lease.AnnotationCancel + `":"` + by + `"}}}`
	if _, err := e.c.CoordinationV1().Leases("ns").Patch(ctx(e.t), release.LeaseName(name, 1), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.clock.Add(2 * time.Minute)
}

// A cancel asked while the revision's executor was lost: the next executor fails it
// without running Helm.
func TestCancelledBeforeTheRun(t *testing.T) {
	e := newEnv(t, 1)
	a := e.reserve("web", "req-1")
	e.cancelWhileLost("web", "alice")
	o, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
	if err != nil || o != OutcomeFailed {
		t.Fatalf("Handle = %q, %v", o, err)
	}
	if st, desc := e.status("web"); st != helmrelease.StatusFailed || !strings.HasPrefix(desc, `Release "web" failed: cancelled by alice`) {
		t.Errorf("revision %s %q", st, desc)
	}
	if e.helm.calls.Load() != 0 || e.leaseExists("web") {
		t.Errorf("Helm ran %d times; lease left %v", e.helm.calls.Load(), e.leaseExists("web"))
	}
}

// A cancel asked while Helm runs stops the action within a progress tick, and the
// revision records who cancelled it.
func TestCancelledDuringTheRun(t *testing.T) {
	e := newEnv(t, 1)
	e.svc.ProgressInterval = 5 * time.Millisecond
	started := make(chan struct{})
	e.helm.run = func(ctx context.Context, _ helmexec.Request) (*helmrelease.Release, error) {
		close(started)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	a := e.reserve("web", "req-1")
	done := make(chan Outcome)
	go func() { o, _ := e.svc.Handle(ctx(t), context.Background(), a, nil); done <- o }()
	<-started
	submit := &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: e.clock}
	if running, err := submit.RequestCancel(ctx(t), "ns", release.LeaseName("web", 1), "req-1", "bob"); err != nil || !running {
		t.Fatalf("RequestCancel = %v, %v", running, err)
	}
	select {
	case o := <-done:
		if o != OutcomeFailed {
			t.Errorf("outcome %s", o)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the action did not stop")
	}
	if st, desc := e.status("web"); st != helmrelease.StatusFailed || !strings.HasPrefix(desc, `Release "web" failed: cancelled by bob`) {
		t.Errorf("revision %s %q", st, desc)
	}
}

// While Helm runs, the action's progress is recorded on its Lease every ProgressInterval.
func TestProgressRecordedOnTheLease(t *testing.T) {
	e := newEnv(t, 1)
	e.svc.ProgressInterval = time.Second
	e.svc.Clock = e.clock
	release1 := make(chan struct{})
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		<-release1
		return e.writes(ctx, req)
	}
	a := e.reserve("web", "req-1")
	done := make(chan Outcome)
	go func() { o, _ := e.svc.Handle(ctx(t), context.Background(), a, nil); done <- o }()
	// Helm runs: the clock holds its deadline and the progress ticker; nothing is recorded
	// until an interval ends.
	testwait.For(t, func() bool { return e.clock.Waiters() == 2 })
	if l, err := e.c.CoordinationV1().Leases("ns").Get(ctx(t), release.LeaseName("web", 1), metav1.GetOptions{}); err != nil || l.Annotations[lease.AnnotationProgress] != "" {
		t.Fatalf("progress recorded before an interval ended: %v", err)
	}
	e.clock.Add(time.Second)
	testwait.For(t, func() bool {
		l, err := e.c.CoordinationV1().Leases("ns").Get(ctx(t), release.LeaseName("web", 1), metav1.GetOptions{})
		return err == nil && l.Annotations[lease.AnnotationProgress] != ""
	})
	l, _ := e.c.CoordinationV1().Leases("ns").Get(ctx(t), release.LeaseName("web", 1), metav1.GetOptions{})
	p, err := progress.Decode(l.Annotations[lease.AnnotationProgress])
	if err != nil || p == nil || !p.Updated.Equal(e.clock.Now()) || p.Phase == "" {
		t.Errorf("recorded progress %+v, %v", p, err)
	}
	close(release1)
	if o := <-done; o != OutcomeDeployed {
		t.Errorf("outcome %s", o)
	}
}
