package sweeper

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/release"
)

// severable is a client whose Lease calls fail once cut: a pod that died (or lost the API
// server) without releasing its leadership.
type severable struct {
	kubernetes.Interface
	cut *atomic.Bool
}

func (s severable) CoordinationV1() coordinationv1client.CoordinationV1Interface {
	return severedCoordination{s.Interface.CoordinationV1(), s.cut}
}

type severedCoordination struct {
	coordinationv1client.CoordinationV1Interface
	cut *atomic.Bool
}

func (c severedCoordination) Leases(ns string) coordinationv1client.LeaseInterface {
	return severedLeases{c.CoordinationV1Interface.Leases(ns), c.cut}
}

type severedLeases struct {
	coordinationv1client.LeaseInterface
	cut *atomic.Bool
}

var errSevered = errors.New("severed")

func (l severedLeases) Get(ctx context.Context, name string, o metav1.GetOptions) (*coordinationv1.Lease, error) {
	if l.cut.Load() {
		return nil, errSevered
	}
	return l.LeaseInterface.Get(ctx, name, o)
}

func (l severedLeases) Create(ctx context.Context, x *coordinationv1.Lease, o metav1.CreateOptions) (*coordinationv1.Lease, error) {
	if l.cut.Load() {
		return nil, errSevered
	}
	return l.LeaseInterface.Create(ctx, x, o)
}

func (l severedLeases) Update(ctx context.Context, x *coordinationv1.Lease, o metav1.UpdateOptions) (*coordinationv1.Lease, error) {
	if l.cut.Load() {
		return nil, errSevered
	}
	return l.LeaseInterface.Update(ctx, x, o)
}

// candidate is one notifier pod of the test: a Sweeper of its own over the env's cluster,
// campaigning as id, counting its passes.
type candidate struct {
	sw     *Sweeper
	cut    atomic.Bool
	passes atomic.Int64
	mu     sync.Mutex
	leads  bool
}

// realTicks tells the fake clock's time but ticks in real time: the election these tests
// run is real-time, and so are the sweeper passes they count.
type realTicks struct{ *fakekube.Clock }

func (realTicks) NewTicker(d time.Duration) clock.Ticker { return clock.RealClock{}.NewTicker(d) }

func (e *env) candidate(id string) *candidate {
	c := &candidate{}
	s := &Sweeper{Store: e.store, Redrive: e.redrive, Log: e.sw.Log, Clock: realTicks{e.clock},
		SigningKey: signingKey, EventMaxAge: 3 * time.Hour, Config: e.sw.Config}
	s.Config.Interval = 20 * time.Millisecond
	s.OnPass = func(PassStats) { c.passes.Add(1) }
	// Short timings (the Lease counts whole seconds): the test waits for the takeover, it
	// does not time it.
	s.Election = &Election{Client: severable{e.c, &c.cut}, Namespace: "async-helm", Name: "notifier", Identity: id,
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond,
		Log: s.Log, OnLeading: func(on bool) { c.mu.Lock(); c.leads = on; c.mu.Unlock() }}
	c.sw = s
	if err := s.Start(ctx(e.t)); err != nil {
		e.t.Fatal(err)
	}
	return c
}

func (c *candidate) leading() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leads
}

// Two notifiers: both watch, one sweeps. The follower runs no pass while the leader lives;
// when the leader stops renewing (dead, no release), the follower takes the Lease and
// sweeps; every dead letter is re-sent exactly once, whoever leads.
func TestOnlyTheLeaderSweepsAndAnotherTakesOver(t *testing.T) {
	e := newEnv(t)
	e.Reserve("web", release.ActionInstall, 1)
	a := e.candidate("a")
	testwait.For(t, func() bool { return a.leading() && a.passes.Load() > 0 })
	b := e.candidate("b")
	seen := a.passes.Load()
	testwait.For(t, func() bool { return a.passes.Load() >= seen+10 })
	if n := b.passes.Load(); n != 0 || b.leading() {
		t.Fatalf("the follower swept %d times while the leader lived", n)
	}

	deadLetter := func() {
		t.Helper()
		if ok, err := e.store.MarkDeadLettered(ctx(t), "ns", release.SecretName("web", 1), "req-web", e.clock.Now()); err != nil || !ok {
			t.Fatal(ok, err)
		}
	}
	deadLetter()
	testwait.For(t, func() bool { return len(e.redrive.Events()) == 1 })

	a.cut.Store(true) // a stops renewing, and never releases
	testwait.For(t, func() bool { return b.leading() && b.passes.Load() > 0 })
	testwait.For(t, func() bool { return !a.leading() })
	deadLetter()
	testwait.For(t, func() bool { return len(e.redrive.Events()) == 2 })
	seen = b.passes.Load()
	testwait.For(t, func() bool { return b.passes.Load() >= seen+10 })
	if n, sent := len(e.redrive.Events()), e.Revision("web", 1).Sent; n != 2 || sent != 2 {
		t.Errorf("%d re-sends, %d claimed, for 2 dead letters", n, sent)
	}
	l, err := e.c.CoordinationV1().Leases("async-helm").Get(ctx(t), "notifier", metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "b" {
		t.Errorf("election Lease %+v, %v", l, err)
	}
}
