package release

import (
	"errors"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// History reads metadata only, newest first, and skips secrets that are not release
// records even when they carry the release's labels.
func TestHistoryFromTheAPIServer(t *testing.T) {
	s, c, _ := newStore(t)
	reserve(t, s, "web", ActionInstall, "r1")
	finish(t, c, "web", 1, helmrelease.StatusSuperseded)
	reserve(t, s, "web", ActionUpgrade, "r2")
	finish(t, c, "web", 2, helmrelease.StatusDeployed)
	reserve(t, s, "web", ActionUpgrade, "r3")
	reserve(t, s, "webapp", ActionInstall, "other")
	if _, err := c.CoreV1().Secrets("ns").Create(ctx(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "odd",
		Labels: map[string]string{LabelOwner: OwnerHelm, LabelName: "web", LabelVersion: "x"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	revs, err := s.History(ctx(t), "ns", "web")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range revs {
		got = append(got, r.SecretName+"="+r.Status+"/"+r.RequestID)
	}
	want := []string{"sh.helm.release.v1.web.v3=pending-upgrade/r3", "sh.helm.release.v1.web.v2=deployed/r2", "sh.helm.release.v1.web.v1=superseded/r1"}
	if len(got) != len(want) {
		t.Fatalf("history %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("history[%d] = %s, want %s", i, got[i], want[i])
		}
	}
	c.Fail("list", "secrets", errors.New("apiserver down"))
	if _, err := s.History(ctx(t), "ns", "web"); err == nil {
		t.Error("a failed list read as an empty history")
	}
	if _, err := s.NextRevision(ctx(t), "ns", "new", ActionInstall); err == nil {
		t.Error("a failed list let an install through")
	}
}

// A reservation with a revision fixed by the caller (submit computed it before fetching
// the chart) is refused when another request took that revision meanwhile.
func TestReserveFixedRevision(t *testing.T) {
	s, _, _ := newStore(t)
	reserve(t, s, "web", ActionInstall, "r1")
	_, err := s.Reserve(ctx(t), Reservation{Namespace: "ns", Name: "web", Action: ActionInstall, Chart: tiny(), RequestID: "r2", Revision: 1})
	if !errors.Is(err, ErrConflict) {
		t.Errorf("second reservation of revision 1: %v", err)
	}
	sec, err := s.Reserve(ctx(t), Reservation{Namespace: "ns", Name: "web", Action: ActionUpgrade, Chart: tiny(), RequestID: "r3", Revision: 2})
	if err != nil || sec.Labels[LabelStatus] != "pending-upgrade" || sec.Labels[LabelVersion] != "2" || sec.Data[DataEvent] != nil {
		t.Errorf("revision 2 = %v, %v", sec, err)
	}
}

// Without the shared index there is no admission count (submit's bound is off), and the
// clock defaults to the wall clock.
func TestStoreWithoutIndexOrClock(t *testing.T) {
	s, c, _ := newStore(t)
	reserve(t, s, "web", ActionInstall, "r")
	bare := &Store{Client: c, Metadata: c.Metadata()}
	before := time.Now()
	if _, err := bare.MarkFailed(ctx(t), "ns", "web", 1, "x", KeepFailed); err != nil {
		t.Fatal(err)
	}
	rel, err := bare.Get(ctx(t), "ns", "web", 1)
	if err != nil || rel.Info.LastDeployed.Time.Before(before) {
		t.Errorf("failed at %v (before %v), %v", rel.Info.LastDeployed, before, err)
	}
}
