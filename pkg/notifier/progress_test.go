package notifier

import (
	"testing"
	"time"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// The progress an executor records on a revision's Lease goes out as progress events: the
// latest one per interval, never one already sent, never for a Lease that is not ours.
func TestProgressEvents(t *testing.T) {
	e := newEnv(t)
	e.svc.Sweep.Interval = 0
	e.svc.ProgressInterval = 20 * time.Millisecond
	e.reserve("web", release.ActionInstall, 1)
	if err := e.svc.Start(ctx(t), true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(e.sink.events()) == 1 }) // pending-install
	h := &lease.Heartbeat{Client: e.c, Holder: "exec", Duration: time.Minute, Now: e.clock.Now}
	held, err := h.Hold(ctx(t), "ns", release.LeaseName("web", 1))
	if err != nil || held == nil {
		t.Fatal(held, err)
	}
	record := func(phase string, ready int) {
		t.Helper()
		e.clock.Add(time.Second)
		p := progress.Progress{Phase: phase, Ready: ready, Total: 3, Updated: e.clock.Now()}
		if lost, err := held.Sync(ctx(t), lease.AnnotationProgress, p.Encode()); lost != "" || err != nil {
			t.Fatal(lost, err)
		}
	}
	record("installing", 0)
	waitFor(t, func() bool { return len(sentProgress(t, e)) == 1 })
	got := sentProgress(t, e)[0]
	if got.Name != "web" || got.Revision != 1 || got.Progress.Phase != "installing" {
		t.Errorf("progress event %+v", got)
	}
	record("waiting", 1)
	record("waiting", 2)
	// An interval may end between the two records and send 1/3 first; the latest, 2/3, is
	// what must go out last (waitFor fails the test if it never does).
	waitFor(t, func() bool {
		all := sentProgress(t, e)
		return len(all) >= 2 && all[len(all)-1].Progress.Ready == 2
	})
	n := len(sentProgress(t, e))
	// Nothing new: nothing more is sent.
	time.Sleep(100 * time.Millisecond) // several intervals, to show that none sends
	if len(sentProgress(t, e)) != n {
		t.Errorf("progress sent again without a change")
	}
}

func sentProgress(t *testing.T, e *env) []events.ProgressChange {
	t.Helper()
	var out []events.ProgressChange
	for _, ev := range e.sink.events() {
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
