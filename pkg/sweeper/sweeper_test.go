package sweeper

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// The sweeper runs every Interval until the context ends.
func TestSweepLoop(t *testing.T) {
	e := newEnv(t)
	e.Reserve("web", release.ActionInstall, 1)
	e.clock.Add(3 * time.Minute)
	e.sw.Config.Interval = time.Minute
	loopCtx, stop := context.WithCancel(ctx(t))
	done := make(chan struct{})
	go func() { e.sw.loop(loopCtx); close(done) }()
	testwait.For(t, e.clock.HasWaiters) // the loop's ticker
	if n := len(e.redrive.Events()); n != 0 {
		t.Fatalf("%d re-sends before the first interval ended", n)
	}
	e.clock.Add(time.Minute)
	testwait.For(t, func() bool { return len(e.redrive.Events()) == 1 })
	stop()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the sweep loop did not stop with its context")
	}
}

// NAMESPACES: only the named namespaces are swept.
func TestNamespacesFilter(t *testing.T) {
	e := newEnv(t)
	e.sw.Namespaces = []string{"other"}
	e.Reserve("web", release.ActionInstall, 1) // in "ns"
	e.clock.Add(e.sw.Config.QueueDeadline * 2)
	if res, err := e.sw.SweepOnce(ctx(t)); err != nil || res != (SweepResult{}) {
		t.Errorf("swept an unwatched namespace: %+v, %v", res, err)
	}
}

// Errors of the API server are the caller's to retry, never a silent success.
func TestAPIErrors(t *testing.T) {
	e := newEnv(t)
	e.Reserve("web", release.ActionInstall, 1)
	a := events.Action{Namespace: "ns", Name: "web", Revision: 1, SecretName: release.SecretName("web", 1), RequestID: "req-web"}
	e.c.Fail("patch", "secrets", errors.New("down"))
	if marked, err := e.sw.DeadLetter(ctx(t), a); err == nil || marked {
		t.Errorf("dead letter with a failing patch: %v, %v", marked, err)
	}
	e.c.Fail("patch", "secrets", nil)
	e.c.Fail("get", "secrets", errors.New("down"))
	if _, err := e.sw.DeadLetter(ctx(t), a); err == nil {
		t.Error("dead letter with a failing read")
	}
	e.c.Fail("get", "secrets", nil)
	e.c.Fail("list", "secrets", errors.New("down"))
	if _, err := e.sw.SweepOnce(ctx(t)); err == nil {
		t.Error("sweep with a failing list")
	}
	e.c.Fail("list", "secrets", nil)
	e.c.Fail("get", "leases", errors.New("down"))
	e.clock.Add(2 * time.Hour)
	if res, err := e.sw.SweepOnce(ctx(t)); err != nil || res != (SweepResult{}) {
		t.Errorf("a revision whose lease cannot be read was swept: %+v, %v", res, err)
	}
}
