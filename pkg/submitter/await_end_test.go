package submitter

import (
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// Attack on submit's API budget by an editor of its own namespace: it keeps the heartbeat
// Lease of its own pending revision alive (the Lease is its to write), then sends upgrades
// with "supersede": each request waits up to 30 s for a revision that never ends, reading the
// live history from the API server every 250 ms as submit (one flow for every tenant at the
// API server's fairness). One request must not cost submit more than a few API reads.
func TestSupersedeOfARevisionKeptAliveCostsFewReads(t *testing.T) {
	e := supersedeEnv(t)
	e.svc.Supersede = SupersedeOptions{} // the defaults: 30 s, every 250 ms
	tenant := &lease.Heartbeat{Client: e.c, Holder: "tenant", Duration: time.Hour, Clock: e.svc.Clock}
	if h, err := tenant.Hold(ctx(t), "ns", release.LeaseName("web", 2)); h == nil || err != nil {
		t.Fatal(h, err)
	}
	// submit's clock moves one poll per reading, so the 30 s pass at once; the Lease keeps its own.
	fixed := e.svc.Clock
	e.svc.Heartbeat = &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: fixed}
	e.svc.Clock = &testingclock.IntervalClock{Time: fixed.Now(), Duration: 250 * time.Millisecond}
	e.svc.Supersede.Poll = time.Millisecond
	before := len(e.c.Actions())
	_, _ = e.svc.Submit(ctx(t), release.ActionUpgrade, superseding("web"), nil)
	lists := 0
	for _, a := range e.c.Actions()[before:] {
		if a.GetVerb() == "list" {
			lists++
		}
	}
	if lists > 10 {
		t.Errorf("one supersede request made %d LISTs (the tenant's Lease kept its revision running)", lists)
	}
}
