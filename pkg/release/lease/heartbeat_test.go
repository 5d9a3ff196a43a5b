package lease

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func heartbeats(t *testing.T) (*Heartbeat, *Heartbeat, *fakekube.Cluster, *fakekube.Clock) {
	t.Helper()
	clock := fakekube.NewClock(t0)
	c := fakekube.New(clock)
	a := &Heartbeat{Client: c, Holder: "pod-a", Duration: 30 * time.Second, Clock: clock}
	b := &Heartbeat{Client: c, Holder: "pod-b", Duration: 30 * time.Second, Clock: clock}
	return a, b, c, clock
}

func lease(t *testing.T, c *fakekube.Cluster) *coordinationv1.Lease {
	t.Helper()
	l, err := c.CoordinationV1().Leases("ns").Get(ctx(t), storage.Key("web", 1), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestHoldTakeoverRenewRelease(t *testing.T) {
	a, b, c, clock := heartbeats(t)
	key := storage.Key("web", 1)
	held, err := a.Hold(ctx(t), "ns", key)
	if err != nil || held == nil {
		t.Fatalf("first Hold = %v, %v", held, err)
	}
	if !strings.HasPrefix(held.holder, "pod-a/") || held.holder == "pod-a/" {
		t.Errorf("holder identity %q is not per action", held.holder)
	}
	// A second action of the same pod does not share the lease.
	if again, err := a.Hold(ctx(t), "ns", key); err != nil || again != nil {
		t.Fatalf("a second action of the same pod got the live lease: %v, %v", again, err)
	}
	if alive, err := Alive(ctx(t), c, "ns", key, clock.Now()); err != nil || !alive {
		t.Errorf("Alive = %v, %v", alive, err)
	}

	// Renewed, the lease stays live past its first duration.
	clock.Add(20 * time.Second)
	if reason := held.renew(ctx(t)); reason != "" {
		t.Fatalf("renew: %s", reason)
	}
	clock.Add(20 * time.Second)
	if got, err := b.Hold(ctx(t), "ns", key); err != nil || got != nil {
		t.Fatalf("pod-b took a renewed lease: %v, %v", got, err)
	}

	// Not renewed for a whole duration: another executor takes it over...
	clock.Add(31 * time.Second)
	if alive, _ := Alive(ctx(t), c, "ns", key, clock.Now()); alive {
		t.Error("an expired lease reads as alive")
	}
	taken, err := b.Hold(ctx(t), "ns", key)
	if err != nil || taken == nil {
		t.Fatalf("takeover of an expired lease = %v, %v", taken, err)
	}
	// ...and the old holder learns it lost it, and leaves the new holder's lease alone.
	if reason := held.renew(ctx(t)); !strings.Contains(reason, "taken over by "+taken.holder) {
		t.Errorf("renew after takeover: %q", reason)
	}
	if err := held.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if l := lease(t, c); *l.Spec.HolderIdentity != taken.holder {
		t.Fatalf("the old holder's release removed or changed the new lease: %v", *l.Spec.HolderIdentity)
	}
	if err := taken.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoordinationV1().Leases("ns").Get(ctx(t), key, metav1.GetOptions{}); err == nil {
		t.Error("Release left the lease")
	}
	if reason := taken.renew(ctx(t)); reason != "the lease was deleted" {
		t.Errorf("renew of a deleted lease: %q", reason)
	}
	if alive, err := Alive(ctx(t), c, "ns", key, clock.Now()); err != nil || alive {
		t.Errorf("Alive without a lease = %v, %v", alive, err)
	}
}

// A write by someone else that keeps our holder (an annotation) is not a loss.
func TestRenewAfterForeignWriteKeepsTheLease(t *testing.T) {
	a, _, c, _ := heartbeats(t)
	held, err := a.Hold(ctx(t), "ns", storage.Key("web", 1))
	if err != nil || held == nil {
		t.Fatal(held, err)
	}
	l := lease(t, c)
	l.Annotations = map[string]string{"note": "x"}
	if _, err := c.CoordinationV1().Leases("ns").Update(ctx(t), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if reason := held.renew(ctx(t)); reason != "" {
		t.Fatalf("renew after a foreign write: %q", reason)
	}
	if reason := held.renew(ctx(t)); reason != "" {
		t.Fatalf("second renew: %q", reason)
	}
	if err := held.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
}

// Of two executors taking over one expired lease, exactly one wins: the update carries
// the resourceVersion it read.
func TestTakeoverIsCompareAndSwap(t *testing.T) {
	a, b, c, clock := heartbeats(t)
	key := storage.Key("web", 1)
	if h, err := a.Hold(ctx(t), "ns", key); err != nil || h == nil {
		t.Fatal(h, err)
	}
	clock.Add(time.Minute)
	stale := lease(t, c) // what a slower executor read before b's takeover
	if h, err := b.Hold(ctx(t), "ns", key); err != nil || h == nil {
		t.Fatal(h, err)
	}
	holder := "pod-c/1"
	stale.Spec.HolderIdentity = &holder
	if _, err := c.CoordinationV1().Leases("ns").Update(ctx(t), stale, metav1.UpdateOptions{}); err == nil {
		t.Fatal("an update with a stale resourceVersion succeeded: the fake does not check preconditions")
	}
}

func TestKeepReportsLossOnce(t *testing.T) {
	clock := fakekube.NewClock(t0)
	c := fakekube.New(clock)
	h := &Heartbeat{Client: c, Holder: "pod-a", Duration: 30 * time.Millisecond, Clock: clock}
	held, err := h.Hold(ctx(t), "ns", storage.Key("web", 1))
	if err != nil || held == nil {
		t.Fatal(held, err)
	}
	if err := c.CoordinationV1().Leases("ns").Delete(ctx(t), storage.Key("web", 1), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	lost := make(chan string, 2)
	done := make(chan struct{})
	go func() { held.Keep(ctx(t), func(r string) { lost <- r }); close(done) }()
	select {
	case r := <-lost:
		if r != "the lease was deleted" {
			t.Errorf("reason %q", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Keep never noticed the deleted lease")
	}
	select {
	case <-done: // Keep stops after a loss
	case <-time.After(5 * time.Second):
		t.Fatal("Keep went on after the loss")
	}
	if len(lost) != 0 {
		t.Error("loss reported twice")
	}
}

func TestHoldErrors(t *testing.T) {
	a, _, c, _ := heartbeats(t)
	c.Fail("get", "leases", errors.New("apiserver down"))
	if h, err := a.Hold(ctx(t), "ns", "k"); err == nil || h != nil {
		t.Errorf("Hold with a failing API server = %v, %v", h, err)
	}
	c.Fail("get", "leases", nil)
	c.Fail("create", "leases", errors.New("quota"))
	if h, err := a.Hold(ctx(t), "ns", "k"); err == nil || h != nil {
		t.Errorf("Hold with a failing create = %v, %v", h, err)
	}
	if _, err := Alive(context.Background(), c, "ns", "k", t0); err != nil {
		t.Errorf("Alive of a missing lease: %v", err)
	}
}

func TestExpiry(t *testing.T) {
	secs := int32(30)
	renew := metav1.NewMicroTime(t0)
	l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &renew, LeaseDurationSeconds: &secs}}
	if !ExpiresAt(l).Equal(t0.Add(30*time.Second)) || Expired(l, t0.Add(30*time.Second)) || !Expired(l, t0.Add(31*time.Second)) {
		t.Errorf("expiry of a lease renewed at t0 for 30s: %v", ExpiresAt(l))
	}
	if !ExpiresAt(&coordinationv1.Lease{}).IsZero() || !Expired(&coordinationv1.Lease{}, t0) {
		t.Error("a lease never renewed must read as expired")
	}
}
