package executor

import (
	"context"
	"errors"
	"testing"
	"testing/synctest"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
)

// shipped sets the executor's shipped defaults for how long a delivery may wait
// (functions/executor/config.go, config/knative).
func shipped(s *Service) {
	s.SlotWait, s.DeliveryTimeout, s.MaxActionTime = time.Hour, 60*time.Minute, 55*time.Minute
}

// How long a delivery waits for a slot: as long as its sender waits, less the action's own
// deadline and a minute; SlotWait only lowers it. The bound of every later wait before the
// action starts (its first CPU slot, a retry's or a remediation's slots: queueWait) is the
// same, or, where the delivery may not wait, the action's own timeout.
func TestSlotWaitIsWhatTheDeliveryAllows(t *testing.T) {
	for _, c := range []struct {
		name                      string
		slotWait, delivery, limit time.Duration
		timeout                   time.Duration
		want, queue               time.Duration
	}{
		{name: "Helm's default timeout", slotWait: time.Hour, delivery: time.Hour, limit: 55 * time.Minute, timeout: 5 * time.Minute, want: 54 * time.Minute, queue: 54 * time.Minute},
		{name: "a 30 m wait", slotWait: time.Hour, delivery: time.Hour, limit: 55 * time.Minute, timeout: 30 * time.Minute, want: 29 * time.Minute, queue: 29 * time.Minute},
		{name: "no timeout: MAX_ACTION_TIME", slotWait: time.Hour, delivery: time.Hour, limit: 55 * time.Minute, want: 4 * time.Minute, queue: 4 * time.Minute},
		{name: "a timeout past MAX_ACTION_TIME", slotWait: time.Hour, delivery: time.Hour, limit: 55 * time.Minute, timeout: 2 * time.Hour, want: 4 * time.Minute, queue: 4 * time.Minute},
		{name: "SLOT_WAIT lowers it", slotWait: 30 * time.Second, delivery: time.Hour, limit: 55 * time.Minute, timeout: 5 * time.Minute, want: 30 * time.Second, queue: 30 * time.Second},
		{name: "the sender's time unknown", slotWait: 10 * time.Minute, timeout: 5 * time.Minute, want: 10 * time.Minute, queue: 10 * time.Minute},
		{name: "no time left: no wait, later waits the timeout", slotWait: time.Hour, delivery: 5 * time.Minute, timeout: 5 * time.Minute, queue: 5 * time.Minute},
		{name: "SLOT_WAIT 0: later waits the timeout", delivery: time.Hour, limit: 55 * time.Minute, timeout: 5 * time.Minute, queue: 5 * time.Minute},
	} {
		s := &Service{SlotWait: c.slotWait, DeliveryTimeout: c.delivery, MaxActionTime: c.limit}
		a := events.Action{Options: events.Options{Timeout: c.timeout}}
		if got := s.slotWait(a); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
		if got := s.queueWait(a); got != c.queue {
			t.Errorf("%s: queueWait %s, want %s", c.name, got, c.queue)
		}
	}
}

// At the shipped defaults a delivery behind a busy executor waits in its tenant's queue for
// as long as the slot stays busy (here 40 minutes), not SLOT_WAIT's 30 s of old followed by
// the Broker's backoff; a copy of it (the sweeper's re-drive) is acknowledged at once, and
// Helm runs it once.
func TestABacklogWaitsInTheExecutorAtTheShippedDefaults(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 1)
		shipped(e.svc)
		hold := make(chan struct{})
		e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
			if req.Name == "busy" {
				<-hold
			}
			return e.writes(ctx, req)
		}
		busy := e.reserve("busy", "r1")
		busy.Options.Timeout = 50 * time.Minute
		go func() { _, _ = e.svc.Handle(context.Background(), context.Background(), busy, nil) }()
		synctest.Wait()
		queued := e.reserve("queued", "r2")
		res := make(chan error, 1)
		go func() {
			o, err := e.svc.Handle(context.Background(), context.Background(), queued, nil)
			if err == nil && o != OutcomeDeployed {
				err = errors.New(string(o))
			}
			res <- err
		}()
		synctest.Wait()
		if o, err := e.svc.Handle(context.Background(), context.Background(), queued, nil); o != OutcomeQueued || err != nil {
			t.Errorf("a copy of the waiting delivery: %s, %v; want %s at once", o, err, OutcomeQueued)
		}
		time.Sleep(40 * time.Minute)
		close(hold)
		if err := <-res; err != nil {
			t.Fatalf("the delivery that waited 40 minutes: %v", err)
		}
		if n := e.helm.calls.Load(); n != 2 {
			t.Errorf("Helm ran %d times for two revisions", n)
		}
	})
}

// A waiting delivery whose executor goes away (its connection breaks: the sender's
// context ends) is answered with an error, so that the Broker redelivers it; nothing of it
// was consumed, and the redelivery to a new executor runs it: its 201 holds.
func TestAWaitingDeliveryOutlivesItsExecutor(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 1)
		shipped(e.svc)
		hold := make(chan struct{})
		e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
			if req.Name == "busy" {
				<-hold
			}
			return e.writes(ctx, req)
		}
		busy := e.reserve("busy", "r1")
		go func() { _, _ = e.svc.Handle(context.Background(), context.Background(), busy, nil) }()
		synctest.Wait()
		queued := e.reserve("queued", "r2")
		conn, broken := context.WithCancel(context.Background())
		res := make(chan error, 1)
		go func() { _, err := e.svc.Handle(conn, context.Background(), queued, nil); res <- err }()
		synctest.Wait()
		broken()
		if err := <-res; err == nil {
			t.Fatal("a waiting delivery whose connection broke was answered 2xx: nobody would redeliver it")
		}
		if st, _ := e.status("queued"); st != helmrelease.StatusPendingInstall {
			t.Fatalf("the revision is %s after its delivery was lost, want still pending", st)
		}
		cp := *e.svc
		restarted := New(cp, 1)
		if o, err := restarted.Handle(context.Background(), context.Background(), queued, nil); o != OutcomeDeployed || err != nil {
			t.Fatalf("the redelivery to a new executor: %s, %v", o, err)
		}
		close(hold)
		synctest.Wait()
	})
}

// A full waiting room turns away the newest delivery of the tenant waiting the most, at
// once, so that another tenant's delivery waits in its place; both tenants' others run.
func TestAFullWaitingRoomTurnsAwayTheTenantWaitingTheMost(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fullRoomTurnsAwayA(t, func(s *Service) { s.MaxWaitingBytes = 2 * waitCost(nil) })
	})
}

// The room is bounded in deliveries too (MaxWaiting): each waits on an open request, and a
// pod holds only containerConcurrency of them before the platform queues the rest first
// come, first served. Small events fill the count before the bytes: A's newest is turned
// away so that B's delivery is seated.
func TestTheWaitingRoomIsBoundedInDeliveries(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		fullRoomTurnsAwayA(t, func(s *Service) { s.MaxWaitingBytes, s.MaxWaiting = 128<<20, 2 })
	})
}

// fullRoomTurnsAwayA holds the one slot, then sends A's two deliveries and B's one into a
// waiting room that room sizes for two: A's newest must be turned away at once (ErrBusy),
// and A's other and B's run once the slot is free.
func fullRoomTurnsAwayA(t *testing.T, room func(*Service)) {
	e := newEnv(t, 1)
	shipped(e.svc)
	room(e.svc)
	e.svc = New(*e.svc, 1)
	hold := make(chan struct{})
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		if req.Name == "busy" {
			<-hold
		}
		return e.writes(ctx, req)
	}
	go func() {
		_, _ = e.svc.Handle(context.Background(), context.Background(), e.reserveAs("h", "holder", "busy", "r0"), nil)
	}()
	synctest.Wait()
	res := map[string]chan error{}
	for _, d := range []struct{ ns, user, name string }{{"a", "alice", "a1"}, {"a", "alice", "a2"}, {"b", "bob", "b1"}} {
		a := e.reserveAs(d.ns, d.user, d.name, "req-"+d.name)
		res[d.name] = make(chan error, 1)
		go func() { _, err := e.svc.Handle(context.Background(), context.Background(), a, nil); res[a.Name] <- err }()
		synctest.Wait()
	}
	select {
	case err := <-res["a2"]:
		if !errors.Is(err, ErrBusy) {
			t.Errorf("A's newest, turned away for B: %v, want ErrBusy", err)
		}
	default:
		t.Fatal("3 deliveries wait in a room of 2: A's newest was not turned away for B's")
	}
	close(hold)
	for _, name := range []string{"a1", "b1"} {
		if err := <-res[name]; err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}
