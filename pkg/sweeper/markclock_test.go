package sweeper

import (
	"fmt"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// Attack (hostile-tenant review): an uninstall mark's clock was its modifiedAt label, which
// the tenant writes. Moved forward every 50 minutes (within the 5-minute skew allowed, so
// never a "mark in the future"), with sent-at dated a century ahead (so no re-send is ever
// due), the tenant's sealed queued mark stayed pending and counted toward its namespace's
// MAX_QUEUED share for ever: QUEUE_DEADLINE was never reached. The clock is now never later
// than the sweeper's first sight of the mark: it is failed one deadline after that.
func TestMovedMarkClockDoesNotKeepAQueuedUninstallPastTheDeadline(t *testing.T) {
	e := deployedWeb(t)
	e.store.SealKey = signingKey // submit's marks are sealed: this one counts toward admission
	stored := e.Signed(events.Action{Action: release.ActionUninstall, Namespace: "ns", Name: "web", Revision: 1,
		SecretName: release.SecretName("web", 1), RequestID: "req-u"})
	if _, err := e.store.MarkUninstalling(ctx(t), release.UninstallMark{Namespace: "ns", Name: "web", Revision: 1,
		RequestID: "req-u", Event: stored}); err != nil {
		t.Fatal(err)
	}
	failedAt := failedUnderRewrites(t, e, func() { // moved ahead, within the skew
		now := e.clock.Now()
		e.Patch("web", 1, fmt.Sprintf(`{"metadata":{"labels":{%q:"%d"},"annotations":{%q:%q}}}`,
			release.LabelModifiedAt, now.Add(4*time.Minute).Unix(),
			release.AnnotationSentAt, now.Add(100*365*24*time.Hour).Format(time.RFC3339Nano)))
	})
	if failedAt < 0 {
		t.Fatalf("the mark whose modifiedAt the tenant moved ahead is still %s after 3 h (QUEUE_DEADLINE %s): it holds its queue slot for ever",
			helmrelease.StatusUninstalling, e.sw.Config.QueueDeadline)
	}
	if limit := e.sw.Config.QueueDeadline + 10*time.Minute; failedAt > limit {
		t.Errorf("failed %s after the mark; want within %s", failedAt, limit)
	}
}

// The clock is the sweeper's first sight only when that is earlier: an untouched label
// (a notifier that starts long after the mark) still decides, and a label moved back
// (earlier) only brings the tenant's own deadline nearer. Unsealed marks, which count for
// nothing, are not remembered.
func TestMarkClockKeepsAnEarlierLabel(t *testing.T) {
	var c markClock
	mark := release.Revision{Namespace: "ns", Name: "web", SecretName: release.SecretName("web", 1), RequestID: "req-u",
		Status: release.StatusUninstalling, Created: t0}
	if got := c.start(mark, true, t0.Add(50*time.Minute)); !got.Equal(t0) {
		t.Errorf("an untouched mark seen first 50 min after it was made: clock %s, want its label %s", got, t0)
	}
	moved := mark
	moved.Created = t0.Add(2 * time.Hour)
	if got := c.start(moved, true, t0.Add(2*time.Hour)); !got.Equal(t0.Add(50 * time.Minute)) {
		t.Errorf("a label moved ahead: clock %s, want the first sight %s", got, t0.Add(50*time.Minute))
	}
	c.forget(t0.Add(2*time.Hour + time.Second))
	if got := c.start(moved, false, t0.Add(3*time.Hour)); !got.Equal(moved.Created) || len(c.seen) != 0 {
		t.Errorf("an unsealed mark: clock %s, %d remembered; want its label and nothing kept", got, len(c.seen))
	}
}

// Attack (hostile-tenant review): every accepted request gives its tenant a sealed key
// (namespace, Secret name, request id), and the mark clock kept each key seen pending for a
// day. Presenting each one once as a pending mark (a sealed reservation relabelled
// uninstalling, then put away), at submit's accept rate, grew the leading notifier's memory
// without bound: millions of entries a day. The history (keys not seen in the last pass) is
// now capped, oldest seen first out, and a key still pending is never dropped: its clock
// holds whatever the flood.
func TestMarkClockMemoryIsBoundedAndKeepsWhatIsPending(t *testing.T) {
	var c markClock
	held := release.Revision{Namespace: "ns", Name: "held", SecretName: release.SecretName("held", 1), RequestID: "req-held",
		Status: release.StatusUninstalling, Created: t0}
	now := t0
	const passes, perPass = 10, maxMarkHistory / 8
	for p := 0; p <= passes; p++ { // the last pass sees only the mark still pending
		for i := 0; i < perPass && p < passes; i++ {
			name := fmt.Sprintf("r%d-%d", p, i)
			c.start(release.Revision{Namespace: "ns", Name: name, SecretName: release.SecretName(name, 1), RequestID: "req-" + name,
				Status: release.StatusUninstalling, Created: now}, true, now)
		}
		moved := held
		moved.Created = now.Add(4 * time.Minute) // the tenant's label, moved ahead every pass
		if got := c.start(moved, true, now); !got.Equal(t0) {
			t.Fatalf("pass %d: the mark still pending has clock %s; want its first sight %s", p, got, t0)
		}
		c.forget(now.Add(-markMemory))
		now = now.Add(10 * time.Second)
	}
	if n, limit := len(c.seen), maxMarkHistory+1; n > limit || !c.seen[markKey{"ns", held.SecretName, held.RequestID}].first.Equal(t0) {
		t.Errorf("%d keys remembered after %d presented once; want at most %d", n, passes*perPass, limit)
	}
}

// Attack (hostile-tenant review of 3a5984a): the history bound was one queue for the whole
// service, the key seen longest ago out first, so the other namespaces' accepted requests
// pushed a tenant's key out for it: at a few hundred requests a second, within minutes. A
// tenant that deleted its sealed queued reservation once its clock neared QUEUE_DEADLINE,
// waited for that, and made it again (same labels, seal and payload, sent-at far ahead) had
// a new clock, and with a few seals taking turns held its slot for ever. Past the bound
// each namespace now keeps its newest keys first: another namespace's traffic never pushes
// out the tenant's newest key.
func TestMarkClockHistoryOutlivesOtherNamespacesTraffic(t *testing.T) {
	var c markClock
	name := release.SecretName("held", 1)
	held := release.Revision{Namespace: "tenant", Name: "held", SecretName: name, RequestID: "req-held",
		Status: string(helmrelease.StatusPendingInstall), Created: t0}
	c.start(held, true, t0)
	c.forget(t0.Add(-markMemory))
	now := t0.Add(10 * time.Second) // the tenant deleted its reservation after this pass
	const passes, perPass = 9, maxMarkHistory / 8
	for p := 0; p < passes; p++ { // other namespaces' accepted requests, each seen pending once
		for i := 0; i < perPass; i++ {
			ns, rel := fmt.Sprintf("busy-%d", i%64), fmt.Sprintf("r%d-%d", p, i)
			c.start(release.Revision{Namespace: ns, Name: rel, SecretName: release.SecretName(rel, 1), RequestID: "req-" + rel,
				Status: string(helmrelease.StatusPendingInstall), Created: now}, true, now)
		}
		c.forget(now.Add(-markMemory))
		now = now.Add(10 * time.Second)
	}
	if n, limit := len(c.seen), maxMarkHistory+perPass; n > limit { // the history, and the last pass's keys
		t.Errorf("%d keys remembered; want at most %d", n, limit)
	}
	remade := held
	remade.Created = now // the Secret made again: a new creationTimestamp
	if got := c.start(remade, true, now); !got.Equal(t0) {
		t.Errorf("the tenant's reservation made again after %d other namespaces' requests: clock %s; want its first sight %s",
			passes*perPass, got, t0)
	}
}

// failedUnderRewrites sweeps web's revision 1 every 10 minutes for 3 hours, the tenant's
// rewrite before every fifth pass (every 50 minutes, from the first), and says how long
// after the start it was failed (-1: never).
func failedUnderRewrites(t *testing.T, e *env, rewrite func()) time.Duration {
	t.Helper()
	for k := 0; k <= 18; k++ {
		if k%5 == 0 {
			rewrite()
		}
		if _, err := e.sw.SweepOnce(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if st, _ := e.Status("web", 1); st == helmrelease.StatusFailed {
			return e.clock.Now().Sub(t0)
		}
		e.clock.Add(10 * time.Minute)
	}
	return -1
}
