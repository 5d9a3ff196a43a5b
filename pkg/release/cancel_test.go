package release

import (
	"errors"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/internal/fakekube"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// Sync writes the progress annotation only when it changed, notices a cancel request, and
// never overwrites another holder's lease.
func TestSyncAndCancelRequest(t *testing.T) {
	a, _, c, clock := heartbeats(t)
	key := LeaseName("web", 1)
	held, err := a.Hold(ctx(t), "ns", key)
	if err != nil || held == nil {
		t.Fatal(held, err)
	}
	if lost, err := held.Sync(ctx(t), AnnotationProgress, `{"phase":"installing"}`); lost != "" || err != nil {
		t.Fatalf("Sync = %q, %v", lost, err)
	}
	if got := lease(t, c).Annotations[AnnotationProgress]; got != `{"phase":"installing"}` {
		t.Errorf("annotation %q", got)
	}
	rv := lease(t, c).ResourceVersion
	if lost, err := held.Sync(ctx(t), AnnotationProgress, `{"phase":"installing"}`); lost != "" || err != nil || lease(t, c).ResourceVersion != rv {
		t.Errorf("an unchanged value was written again: %q, %v", lost, err)
	}
	if held.CancelledBy() != "" {
		t.Error("cancelled before anyone asked")
	}

	// A cancel request while the action runs lands on the lease; the next Sync sees it,
	// and its own write (stale resourceVersion) does not erase the request.
	cancelling := &Heartbeat{Client: c, Holder: "submit", Duration: time.Hour, Now: clock.Now}
	running, err := cancelling.RequestCancel(ctx(t), "ns", key, "alice")
	if err != nil || !running {
		t.Fatalf("RequestCancel of a running revision = %v, %v", running, err)
	}
	if lost, err := held.Sync(ctx(t), AnnotationProgress, `{"phase":"waiting"}`); lost != "" || err != nil {
		t.Fatalf("Sync after the request = %q, %v", lost, err)
	}
	if held.CancelledBy() != "alice" || lease(t, c).Annotations[AnnotationCancel] != "alice" {
		t.Errorf("cancel request lost: held %q, lease %v", held.CancelledBy(), lease(t, c).Annotations)
	}
	if err := held.Release(ctx(t)); err != nil {
		t.Fatal(err)
	}
	if lost, _ := held.Sync(ctx(t), AnnotationProgress, "x"); lost != "the lease was deleted" {
		t.Errorf("Sync of a deleted lease: %q", lost)
	}
}

// A cancel of a revision nobody runs takes its lease (no executor can start it), and only
// the same canceller's ReleaseCancel deletes it.
func TestCancelOfAnIdleRevision(t *testing.T) {
	a, _, c, clock := heartbeats(t)
	key := LeaseName("web", 1)
	submit := &Heartbeat{Client: c, Holder: "submit", Duration: time.Hour, Now: clock.Now}
	running, err := submit.RequestCancel(ctx(t), "ns", key, "alice")
	if err != nil || running {
		t.Fatalf("RequestCancel of an idle revision = %v, %v", running, err)
	}
	if h, err := a.Hold(ctx(t), "ns", key); h != nil || err != nil {
		t.Fatalf("an executor took a lease held by the cancel: %v, %v", h, err)
	}
	if err := submit.ReleaseCancel(ctx(t), "ns", key, "bob"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoordinationV1().Leases("ns").Get(ctx(t), key, metav1.GetOptions{}); err != nil {
		t.Error("another canceller's ReleaseCancel deleted the lease")
	}
	if err := submit.ReleaseCancel(ctx(t), "ns", key, "alice"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CoordinationV1().Leases("ns").Get(ctx(t), key, metav1.GetOptions{}); err == nil {
		t.Error("the cancel's lease stayed")
	}
	if err := submit.ReleaseCancel(ctx(t), "ns", key, "alice"); err != nil {
		t.Errorf("ReleaseCancel of nothing: %v", err)
	}
	c.Fail("get", "leases", errors.New("down"))
	if _, err := submit.RequestCancel(ctx(t), "ns", key, "alice"); err == nil {
		t.Error("RequestCancel with a failing API server")
	}
}

// A pending revision's progress is read from its Lease; none without a Lease.
func TestStoreProgress(t *testing.T) {
	a, _, c, clock := heartbeats(t)
	s := &Store{Client: c, Metadata: c.Metadata(), Now: clock.Now}
	key := LeaseName("web", 1)
	if p, err := s.Progress(ctx(t), "ns", key); p != nil || err != nil {
		t.Errorf("progress without a lease = %v, %v", p, err)
	}
	held, err := a.Hold(ctx(t), "ns", key)
	if err != nil || held == nil {
		t.Fatal(held, err)
	}
	if p, err := s.Progress(ctx(t), "ns", key); p != nil || err != nil {
		t.Errorf("progress of a lease without any = %v, %v", p, err)
	}
	if _, err := held.Sync(ctx(t), AnnotationProgress, `{"phase":"waiting","ready":2,"total":5,"updated":"2026-12-01T10:00:00Z"}`); err != nil {
		t.Fatal(err)
	}
	p, err := s.Progress(ctx(t), "ns", key)
	if err != nil || p == nil || p.Phase != "waiting" || p.Ready != 2 || p.Total != 5 {
		t.Errorf("progress = %+v, %v", p, err)
	}
	c.Fail("get", "leases", errors.New("down"))
	if _, err := s.Progress(ctx(t), "ns", key); err == nil {
		t.Error("a failed read reads as no progress")
	}
}

// LiveHistory never answers from the cache: a cancel must see the revision as it is.
func TestLiveHistoryBypassesTheIndex(t *testing.T) {
	s, _, _ := newStore(t)
	reserve(t, s, "web", ActionInstall, "r")
	s.Revisions = staleIndex{}
	if revs, _ := s.History(ctx(t), "ns", "web"); len(revs) != 0 {
		t.Fatalf("History did not use the index: %v", revs)
	}
	revs, err := s.LiveHistory(ctx(t), "ns", "web")
	if err != nil || len(revs) != 1 || revs[0].RequestID != "r" {
		t.Errorf("LiveHistory = %+v, %v", revs, err)
	}
}

// staleIndex is a cache that has not seen anything yet.
type staleIndex struct{}

func (staleIndex) ByIndex(string, string) ([]any, error)      { return nil, nil }
func (staleIndex) IndexKeys(string, string) ([]string, error) { return nil, nil }

// The notifier finds the executors' Leases with SelectorLeases: every Lease Hold creates
// must match it, and a foreign Lease must not.
func TestSelectorLeasesMatchesHeldLeases(t *testing.T) {
	a, _, c, _ := heartbeats(t)
	if h, err := a.Hold(ctx(t), "ns", LeaseName("web", 1)); h == nil || err != nil {
		t.Fatal(h, err)
	}
	l, err := c.CoordinationV1().Leases("ns").List(ctx(t), metav1.ListOptions{LabelSelector: SelectorLeases})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != LeaseName("web", 1) {
		t.Fatalf("leases selected: %v, %v", l, err)
	}
	sel, err := labels.Parse(SelectorLeases)
	if err != nil || sel.Matches(labels.Set{"app.kubernetes.io/managed-by": "helm"}) {
		t.Errorf("selector %q: %v", SelectorLeases, err)
	}
}

// Current picks an upgrade's base from the cache, but a cache that has not seen the
// deployed revision must not turn a good upgrade away: it confirms "none" with the API server.
func TestCurrentConfirmsNoBaseWithTheAPIServer(t *testing.T) {
	s, c, _ := newStore(t)
	reserve(t, s, "web", ActionInstall, "r")
	finish(t, c, "web", 1, helmrelease.StatusDeployed)
	s.Revisions = staleIndex{}
	base, err := s.Current(ctx(t), "ns", "web", 2)
	if err != nil || base == nil || base.Version != 1 || base.Info.Status != helmrelease.StatusDeployed {
		t.Errorf("Current behind a stale cache = %v, %v; want revision 1, deployed", base, err)
	}
	if _, err := s.Deployed(ctx(t), "ns", "web"); err != nil {
		t.Errorf("Deployed behind a stale cache: %v", err)
	}
}

// A cache that has seen revision 1 deployed but not yet revision 2 must not make revision 1
// the base of revision 3.
func TestCurrentIgnoresACacheMissingRevisions(t *testing.T) {
	s, c, _ := newStore(t)
	reserve(t, s, "web", ActionInstall, "r1")
	finish(t, c, "web", 1, helmrelease.StatusDeployed)
	s.Revisions = fixedIndex{mustMeta(t, c, "web", 1)}
	finish(t, c, "web", 1, helmrelease.StatusSuperseded)
	reserve(t, s, "web", ActionUpgrade, "r2")
	finish(t, c, "web", 2, helmrelease.StatusDeployed)
	base, err := s.Current(ctx(t), "ns", "web", 3)
	if err != nil || base == nil || base.Version != 2 {
		t.Errorf("Current(below 3) with a cache that holds only revision 1 = %v, %v; want revision 2", base, err)
	}
}

// fixedIndex is a cache frozen at the objects it was given.
type fixedIndex []any

func (x fixedIndex) ByIndex(string, string) ([]any, error)      { return x, nil }
func (x fixedIndex) IndexKeys(string, string) ([]string, error) { return nil, nil }

func mustMeta(t *testing.T, c *fakekube.Cluster, name string, rev int) *metav1.ObjectMeta {
	t.Helper()
	sec, err := c.CoreV1().Secrets("ns").Get(ctx(t), SecretName(name, rev), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sec.ObjectMeta.DeepCopy()
}

// The cancel request's patch was formatted with Go's %q, which is not JSON for every
// string: a user name with a control character made the request fail.
func TestCancelRequestByAnyUserName(t *testing.T) {
	a, _, c, clock := heartbeats(t)
	key := LeaseName("web", 1)
	if held, err := a.Hold(ctx(t), "ns", key); err != nil || held == nil {
		t.Fatal(held, err)
	}
	by := "odd\x7fname"
	cancelling := &Heartbeat{Client: c, Holder: "submit", Duration: time.Hour, Now: clock.Now}
	if running, err := cancelling.RequestCancel(ctx(t), "ns", key, by); err != nil || !running {
		t.Fatalf("RequestCancel = %v, %v", running, err)
	}
	if got := lease(t, c).Annotations[AnnotationCancel]; got != by {
		t.Fatalf("cancel annotation %q", got)
	}
}
