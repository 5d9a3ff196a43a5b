package release

import (
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/internal/testwait"
)

// finish moves a revision to status as Helm's own driver writes it (which drops our
// queued label and stored event, as Helm's adoption rewrite does).
func finish(t *testing.T, c *fakekube.Cluster, name string, rev int, status helmrelease.Status) {
	t.Helper()
	d := driver.NewSecrets(c.CoreV1().Secrets("ns"))
	rel, err := d.Get(SecretName(name, rev))
	if err != nil {
		t.Fatal(err)
	}
	rel.Info.Status = status
	delete(rel.Labels, LabelQueued)
	if err := d.Update(SecretName(name, rev), rel); err != nil {
		t.Fatal(err)
	}
}

func TestReserveWritesHelmsRecord(t *testing.T) {
	s, c, _ := newStore(t)
	if rev := reserve(t, s, "web", ActionInstall, "req-1"); rev != 1 {
		t.Fatalf("install reserved revision %d, want 1", rev)
	}
	sec, err := c.CoreV1().Secrets("ns").Get(ctx(t), "sh.helm.release.v1.web.v1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{LabelOwner: "helm", LabelName: "web", LabelStatus: "pending-install", LabelVersion: "1",
		LabelRequestID: "req-1", LabelRevision: "1", LabelQueued: "true", LabelChart: "tiny-1.0.0"} {
		if sec.Labels[k] != want {
			t.Errorf("label %s = %q, want %q", k, sec.Labels[k], want)
		}
	}
	if string(sec.Type) != SecretType || string(sec.Data[DataEvent]) != `{"id":"req-1"}` {
		t.Errorf("type %q, stored event %q", sec.Type, sec.Data[DataEvent])
	}
	// Helm itself reads the reservation as a pending release.
	rel, err := driver.NewSecrets(c.CoreV1().Secrets("ns")).Get(sec.Name)
	if err != nil {
		t.Fatal(err)
	}
	if rel.Info.Status != helmrelease.StatusPendingInstall || rel.Info.Description != ReservedDescription ||
		rel.Chart.Metadata.Name != "tiny" || rel.Config["replicas"] != float64(2) || !rel.Info.FirstDeployed.Time.Equal(t0) {
		t.Errorf("Helm reads %+v (chart %v, config %v)", rel.Info, rel.Chart.Metadata, rel.Config)
	}
}

func TestNextRevision(t *testing.T) {
	for _, tc := range []struct {
		name    string
		history []helmrelease.Status // revisions 1..n, in order
		action  Action
		want    int
		err     error
		pending *PendingError
	}{
		{"install of a new name", nil, ActionInstall, 1, nil, nil},
		{"install over a deployed release", []helmrelease.Status{helmrelease.StatusDeployed}, ActionInstall, 0, ErrNameInUse, nil},
		{"install over a failed one", []helmrelease.Status{helmrelease.StatusFailed}, ActionInstall, 0, ErrNameInUse, nil},
		{"install over a pending install", []helmrelease.Status{""}, ActionInstall, 0, ErrNameInUse,
			&PendingError{Revision: 1, Status: "pending-install"}},
		{"upgrade of nothing", nil, ActionUpgrade, 0, ErrNotFound, nil},
		{"upgrade of a deployed release", []helmrelease.Status{helmrelease.StatusSuperseded, helmrelease.StatusDeployed}, ActionUpgrade, 3, nil, nil},
		{"upgrade of a failed release", []helmrelease.Status{helmrelease.StatusDeployed, helmrelease.StatusFailed}, ActionUpgrade, 3, nil, nil},
		{"upgrade while pending", []helmrelease.Status{helmrelease.StatusDeployed, ""}, ActionUpgrade, 0, ErrPending,
			&PendingError{Revision: 2, Status: "pending-upgrade"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c, _ := newStore(t)
			for i, st := range tc.history {
				action := ActionInstall
				if i > 0 {
					action = ActionUpgrade
				}
				reserve(t, s, "web", action, "r")
				if st != "" {
					finish(t, c, "web", i+1, st)
				}
			}
			got, err := s.NextRevision(ctx(t), "ns", "web", tc.action)
			if got != tc.want || !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("NextRevision = %d, %v; want %d, %v", got, err, tc.want, tc.err)
			}
			var pe *PendingError
			if tc.pending != nil && (!errors.As(err, &pe) || *pe != *tc.pending) {
				t.Errorf("error %v does not name %+v", err, tc.pending)
			}
		})
	}
}

func TestReserveRaceHasOneWinner(t *testing.T) {
	s, _, _ := newStore(t)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[i] = s.Reserve(ctx(t), Reservation{Namespace: "ns", Name: "web", Action: ActionInstall, Chart: tiny(), Revision: 1, RequestID: "r"})
		}()
	}
	wg.Wait()
	won := 0
	for _, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, ErrConflict):
			t.Errorf("a loser got %v, want ErrConflict", err)
		}
	}
	if won != 1 {
		t.Errorf("%d reservations of one revision succeeded, want 1", won)
	}
}

func TestUndoDeletesOnlyItsOwnObject(t *testing.T) {
	s, c, _ := newStore(t)
	sec, err := s.Reserve(ctx(t), Reservation{Namespace: "ns", Name: "web", Action: ActionInstall, Chart: tiny(), RequestID: "a"})
	if err != nil {
		t.Fatal(err)
	}
	// Someone deleted and re-reserved the same name: same name, other UID.
	if err := c.CoreV1().Secrets("ns").Delete(ctx(t), sec.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Reserve(ctx(t), Reservation{Namespace: "ns", Name: "web", Action: ActionInstall, Chart: tiny(), RequestID: "b"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Undo(ctx(t), sec); err == nil {
		t.Fatal("undo of a stale reservation deleted the newer one")
	}
	cur, err := c.CoreV1().Secrets("ns").Get(ctx(t), sec.Name, metav1.GetOptions{})
	if err != nil || cur.Labels[LabelRequestID] != "b" {
		t.Fatalf("the newer reservation is gone: %v", err)
	}
	if err := s.Undo(ctx(t), cur); err != nil {
		t.Fatalf("undo of its own reservation: %v", err)
	}
	if _, err := s.History(ctx(t), "ns", "web"); err != nil {
		t.Fatal(err)
	}
	if revs, _ := s.History(ctx(t), "ns", "web"); len(revs) != 0 {
		t.Errorf("history after undo: %+v", revs)
	}
}

func TestMarkFailed(t *testing.T) {
	for _, tc := range []struct {
		name      string
		status    helmrelease.Status // "" leaves the reservation pending
		overwrite IfFailed
		changed   bool
		want      helmrelease.Status
		wantDesc  string
	}{
		{"pending reservation", "", KeepFailed, true, helmrelease.StatusFailed, "boom"},
		{"deployed is left alone", helmrelease.StatusDeployed, ReplaceFailed, false, helmrelease.StatusDeployed, ReservedDescription},
		{"failed keeps Helm's reason", helmrelease.StatusFailed, KeepFailed, false, helmrelease.StatusFailed, ReservedDescription},
		{"failed gets the better reason", helmrelease.StatusFailed, ReplaceFailed, true, helmrelease.StatusFailed, "boom"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c, clock := newStore(t)
			reserve(t, s, "web", ActionInstall, "r")
			if tc.status != "" {
				finish(t, c, "web", 1, tc.status)
			}
			clock.Add(time.Minute)
			changed, err := s.MarkFailed(ctx(t), "ns", "web", 1, "boom", tc.overwrite)
			if err != nil || changed != tc.changed {
				t.Fatalf("MarkFailed = %v, %v; want %v", changed, err, tc.changed)
			}
			rel, err := s.Get(ctx(t), "ns", "web", 1)
			if err != nil {
				t.Fatal(err)
			}
			if rel.Info.Status != tc.want || !strings.HasPrefix(rel.Info.Description, tc.wantDesc) {
				t.Errorf("status %s %q, want %s %q", rel.Info.Status, rel.Info.Description, tc.want, tc.wantDesc)
			}
			sec, _ := c.CoreV1().Secrets("ns").Get(ctx(t), SecretName("web", 1), metav1.GetOptions{})
			if tc.changed && (sec.Labels[LabelQueued] != "" || sec.Labels[LabelStatus] != "failed" || !rel.Info.LastDeployed.Time.Equal(t0.Add(time.Minute))) {
				t.Errorf("failed revision labels %v, last deployed %v", sec.Labels, rel.Info.LastDeployed)
			}
		})
	}
	s, _, _ := newStore(t)
	// A revision that no longer exists is left alone (its reservation was taken back).
	if changed, err := s.MarkFailed(ctx(t), "ns", "gone", 1, "boom", KeepFailed); changed || err != nil {
		t.Errorf("MarkFailed of a missing revision: %v %v", changed, err)
	}
}

// TestRevisionIndex: submit's admission count and history come from the shared index.
func TestRevisionIndex(t *testing.T) {
	s, c, _ := newStore(t)
	reserve(t, s, "a", ActionInstall, "r")
	reserve(t, s, "b", ActionInstall, "r")
	finish(t, c, "b", 1, helmrelease.StatusDeployed)
	reserve(t, s, "b", ActionUpgrade, "r")
	// Another namespace, and a revision that is not ours (labels copied from an older one).
	other := &Store{Client: c, Metadata: c.Metadata()}
	if _, err := other.Reserve(ctx(t), Reservation{Namespace: "ns2", Name: "c", Action: ActionInstall, Chart: tiny(), RequestID: "r"}); err != nil {
		t.Fatal(err)
	}
	patch := `{"metadata":{"labels":{"` + LabelRevision + `":"7"}}}`
	if _, err := c.CoreV1().Secrets("ns2").Patch(ctx(t), SecretName("c", 1), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}

	x := running(t)(NewRevisionIndex(c.Metadata()))
	s.Revisions = x
	revs, err := s.History(ctx(t), "ns", "b")
	if err != nil || len(revs) != 2 || revs[0].Version != 2 || revs[1].Status != "deployed" {
		t.Errorf("History(b) from the index = %+v, %v", revs, err)
	}
	if m, err := x.Get("ns/" + SecretName("a", 1)); err != nil || m == nil || m.Labels[LabelName] != "a" {
		t.Errorf("Get = %v, %v", m, err)
	}
	if m, err := x.Get("ns/nothing"); err != nil || m != nil {
		t.Errorf("Get of an unknown key = %v, %v", m, err)
	}
	// A cache that lags must not refuse: NextRevision confirms a refusal with the API server.
	finish(t, c, "b", 2, helmrelease.StatusDeployed)
	if rev, err := s.NextRevision(ctx(t), "ns", "b", ActionUpgrade); err != nil || rev != 3 {
		t.Errorf("NextRevision after the pending upgrade finished = %d, %v", rev, err)
	}
	// The index follows the watch: a v1 deleted.
	if err := c.CoreV1().Secrets("ns").Delete(ctx(t), SecretName("a", 1), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, func() bool { m, _ := x.Get("ns/" + SecretName("a", 1)); return m == nil })

	// One index over named namespaces sees only those (the notifier's NAMESPACES).
	only := running(t)(NewRevisionIndex(c.Metadata(), "ns2"))
	if objs, _ := only.ByIndex(ReleaseIndex, "ns/a"); len(objs) != 0 {
		t.Errorf("an index over ns2 holds %v", objs)
	}
	if objs, _ := only.ByIndex(ReleaseIndex, "ns2/c"); len(objs) != 1 {
		t.Errorf("an index over ns2 lacks c: %v", objs)
	}
}

func TestGetNotFound(t *testing.T) {
	s, _, _ := newStore(t)
	if _, err := s.Get(ctx(t), "ns", "web", 1); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get of a missing revision: %v", err)
	}
}

// MarkFailedAt fails a revision only at the version it was read at: the sweeper's
// decision on a record that was since marked uninstalling by a hand-run helm uninstall
// (which rewrites it, stored event and all) does not land on that mark.
func TestMarkFailedAtFailsOnlyTheVersionRead(t *testing.T) {
	s, c, _ := newStore(t)
	reserve(t, s, "web", ActionInstall, "req-1")
	sec, err := c.CoreV1().Secrets("ns").Get(ctx(t), SecretName("web", 1), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	read, _ := RevisionFromMeta(sec)
	finish(t, c, "web", 1, helmrelease.StatusDeployed)
	finish(t, c, "web", 1, helmrelease.StatusUninstalling)
	if done, err := s.MarkFailedAt(ctx(t), read, "no live executor"); done || err != nil {
		t.Fatalf("MarkFailedAt of a version rewritten since: %v %v", done, err)
	}
	if rel, err := s.Get(ctx(t), "ns", "web", 1); err != nil || rel.Info.Status != helmrelease.StatusUninstalling {
		t.Fatalf("the hand-run uninstall became %v (%v)", rel.Info.Status, err)
	}
	sec, err = c.CoreV1().Secrets("ns").Get(ctx(t), SecretName("web", 1), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	now, _ := RevisionFromMeta(sec)
	if done, err := s.MarkFailedAt(ctx(t), now, "stuck"); !done || err != nil {
		t.Fatalf("MarkFailedAt at the version read: %v %v", done, err)
	}
}
