package release

import (
	"errors"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/pkg/release/lease"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A pending revision's progress is read from its Lease; none without a Lease.
func TestStoreProgress(t *testing.T) {
	s, c, clock := newStore(t)
	a := &lease.Heartbeat{Client: c, Holder: "pod-a", Duration: 30 * time.Second, Clock: clock}
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
	if _, err := held.Sync(ctx(t), lease.AnnotationProgress, `{"phase":"waiting","ready":2,"total":5,"updated":"2026-12-01T10:00:00Z"}`); err != nil {
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

func (staleIndex) ByIndex(string, string) ([]any, error) { return nil, nil }

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

func (x fixedIndex) ByIndex(string, string) ([]any, error) { return x, nil }

func mustMeta(t *testing.T, c *fakekube.Cluster, name string, rev int) *metav1.ObjectMeta {
	t.Helper()
	sec, err := c.CoreV1().Secrets("ns").Get(ctx(t), SecretName(name, rev), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sec.ObjectMeta.DeepCopy()
}
