package release

import (
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sealedReservation is revision 1 of name, reserved and sealed as submit does.
func sealedReservation(t *testing.T, s *Store, name string) *corev1.Secret {
	t.Helper()
	s.SealKey = sealKey
	reserve(t, s, name, ActionInstall, "req-"+name)
	sec, err := s.Client.CoreV1().Secrets("ns").Get(ctx(t), SecretName(name, 1), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return sec
}

// Every way a reservation or an uninstall mark ends drops its queued label (a list shows it
// started, the sweeper no longer re-sends it): Helm's rewrite (adoption), MarkFailed before
// adoption (cancel, supersede, the executor's failures, the sweeper), MarkFailed of a mark,
// MarkUndecodable, Unmark and Undo.
func TestEndedRevisionsDoNotCount(t *testing.T) {
	s, c, _ := newStore(t)
	names := []string{"adopted", "failed", "undecodable", "undone", "mark-failed", "mark-undone", "queued"}
	secs := map[string]*corev1.Secret{}
	for _, n := range names {
		secs[n] = sealedReservation(t, s, n)
	}
	finish(t, c, "adopted", 1, helmrelease.StatusDeployed)
	if done, err := s.MarkFailed(ctx(t), "ns", "failed", 1, "cancelled by alice", KeepFailed); !done || err != nil {
		t.Fatalf("MarkFailed: %v %v", done, err)
	}
	rev, _ := RevisionFromMeta(secs["undecodable"])
	if done, err := s.MarkUndecodable(ctx(t), rev, "does not decode"); !done || err != nil {
		t.Fatalf("MarkUndecodable: %v %v", done, err)
	}
	if err := s.Undo(ctx(t), secs["undone"]); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"mark-failed", "mark-undone"} {
		finish(t, c, n, 1, helmrelease.StatusDeployed)
	}
	if _, err := s.MarkUninstalling(ctx(t), UninstallMark{Namespace: "ns", Name: "mark-failed", Revision: 1, RequestID: "req-u1"}); err != nil {
		t.Fatal(err)
	}
	if done, err := s.MarkFailed(ctx(t), "ns", "mark-failed", 1, "uninstall failed", KeepFailed); !done || err != nil {
		t.Fatalf("MarkFailed of a mark: %v %v", done, err)
	}
	marked, err := s.MarkUninstalling(ctx(t), UninstallMark{Namespace: "ns", Name: "mark-undone", Revision: 1, RequestID: "req-u2"})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Unmark(ctx(t), marked); err != nil {
		t.Fatal(err)
	}
	list, err := c.CoreV1().Secrets("ns").List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		m := &list.Items[i]
		if want := m.Name == SecretName("queued", 1); (m.Labels[LabelQueued] == "true") != want {
			t.Errorf("%s (status %s): queued %v, want %v; labels %v", m.Name, m.Labels[LabelStatus], !want, want, m.Labels)
		}
	}
}
