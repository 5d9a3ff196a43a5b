package notifier

import (
	"fmt"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// The progress an executor records on a revision's Lease goes out as progress events: the
// latest one per interval, never one already sent, never for a Lease that is not ours.
func TestProgressEvents(t *testing.T) {
	e := newEnv(t)
	e.svc.ProgressInterval = time.Minute
	e.Reserve("web", release.ActionInstall, 1)
	e.Reserve("api", release.ActionInstall, 1)
	if err := e.svc.Start(ctx(t), true); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, func() bool { return len(e.sink.Events()) == 2 }) // pending-install
	testwait.For(t, e.clock.HasWaiters)                               // the progress events' ticker
	helds := e.holdAll("web", "api")
	record := func(name, phase string, ready int) {
		t.Helper()
		e.clock.Add(time.Second) // newer than the last, and no tick
		p := progress.Progress{Phase: phase, Ready: ready, Total: 3, Updated: e.clock.Now()}
		if lost, err := helds[name].Sync(ctx(t), lease.AnnotationProgress, p.Encode()); lost != "" || err != nil {
			t.Fatal(lost, err)
		}
	}
	// sentAfterTicks moves the clock an interval at a time until ok (the Lease reaches the
	// notifier through its informer, maybe after a tick).
	sentAfterTicks := func(ok func([]events.ProgressChange) bool) {
		t.Helper()
		testwait.For(t, func() bool { e.clock.Add(time.Minute); return ok(sentProgress(t, e)) })
	}
	record("web", "installing", 0)
	sentAfterTicks(func(all []events.ProgressChange) bool { return len(all) == 1 })
	got := sentProgress(t, e)[0]
	if got.Name != "web" || got.Revision != 1 || got.Progress.Phase != "installing" {
		t.Errorf("progress event %+v", got)
	}
	record("web", "waiting", 1)
	record("web", "waiting", 2)
	// An interval may end between the two records and send 1/3 first; the latest, 2/3, is
	// what must go out last (testwait fails the test if it never does).
	sentAfterTicks(func(all []events.ProgressChange) bool {
		return len(all) >= 2 && all[len(all)-1].Progress.Ready == 2
	})
	// Nothing new for web: nothing more is sent for it. api's progress, recorded before each
	// tick, shows that the ticks ran: the loop handles one tick after the other, so once
	// api's third is sent, the ticks before it are done.
	web := len(sentProgress(t, e))
	for ready := range 3 {
		record("api", "waiting", ready)
		sentAfterTicks(func(all []events.ProgressChange) bool {
			last := all[len(all)-1]
			return last.Name == "api" && last.Progress.Ready == ready
		})
	}
	for _, c := range sentProgress(t, e)[web:] {
		if c.Name != "api" {
			t.Errorf("progress of %s sent again without a change: %+v", c.Name, c.Progress)
		}
	}
}

// holdAll has an executor hold the Lease of revision 1 of each name.
func (e *env) holdAll(names ...string) map[string]*lease.Held {
	e.t.Helper()
	h := &lease.Heartbeat{Client: e.c, Holder: "exec", Duration: time.Hour, Clock: e.clock}
	helds := map[string]*lease.Held{}
	for _, name := range names {
		held, err := h.Hold(ctx(e.t), "ns", release.LeaseName(name, 1))
		if err != nil || held == nil {
			e.t.Fatal(held, err)
		}
		helds[name] = held
	}
	return helds
}

func sentProgress(t *testing.T, e *env) []events.ProgressChange {
	t.Helper()
	var out []events.ProgressChange
	for _, ev := range e.sink.Events() {
		if ev.Type() != events.TypeProgress {
			continue
		}
		var c events.ProgressChange
		if err := ev.DataAs(&c); err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
	return out
}

// One namespace's progress on many Leases gets at most ProgressPerNamespace events an
// interval, the rest the next; another namespace's goes out in the same interval.
func TestProgressEventsAreBoundedPerNamespace(t *testing.T) {
	e := newEnv(t)
	p := &progressEvents{s: e.svc, interval: time.Minute, latest: map[string]*events.ProgressChange{}, sent: map[string]time.Time{}}
	leaseOf := func(ns, name string) *coordinationv1.Lease {
		pr := progress.Progress{Phase: "waiting", Total: 1, Updated: t0}
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: release.LeaseName(name, 1),
			Annotations: map[string]string{lease.AnnotationProgress: pr.Encode()}}}
	}
	const flood = 3 * ProgressPerNamespace
	for i := range flood {
		p.observe(leaseOf("a", fmt.Sprintf("r%d", i)))
	}
	p.observe(leaseOf("b", "web"))
	count := func() (a, b int) {
		for _, c := range sentProgress(t, e) {
			if c.Namespace == "a" {
				a++
			} else {
				b++
			}
		}
		return a, b
	}
	p.tick(ctx(t))
	if a, b := count(); a != ProgressPerNamespace || b != 1 {
		t.Errorf("one interval sent %d of a's and %d of b's progress, want %d and 1", a, b, ProgressPerNamespace)
	}
	p.tick(ctx(t))
	p.tick(ctx(t))
	if a, _ := count(); a != flood {
		t.Errorf("after three intervals %d of a's %d progress events were sent", a, flood)
	}
}
