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

// Every label but the queued label, Helm's owner label and the seal is a namespace
// editor's to write on its own reservations: none of them may take one out of the count
// (the executor runs a reservation whose payload is still pending whatever they say). What
// does take it out (dropping the queued label, changing the owner label the index selects
// on, breaking the seal) makes the executor fail it unrun.
func TestCountsAsQueuedReadsOnlyWhatTenantsCannotFake(t *testing.T) {
	s, _, _ := newStore(t)
	sec := sealedReservation(t, s, "web")
	for _, c := range []struct {
		what  string
		label string
		value *string // nil: removed
		count bool
	}{
		{"as reserved", "", nil, true},
		{"status label deployed", LabelStatus, ptr("deployed"), true},
		{"status label failed", LabelStatus, ptr("failed"), true},
		{"status label removed", LabelStatus, nil, true},
		{"revision label", LabelRevision, ptr("2"), true},
		{"version label", LabelVersion, ptr("x"), true},
		{"name label", LabelName, nil, true},
		{"uninstalling without the action label", LabelStatus, ptr(StatusUninstalling), true},
		{"queued label removed", LabelQueued, nil, false},
		{"owner label", LabelOwner, ptr("flux"), false},
		{"seal removed", LabelSeal, nil, false},
		{"request id", LabelRequestID, ptr("req-other"), false},
	} {
		m := sec.ObjectMeta.DeepCopy()
		switch {
		case c.label != "" && c.value == nil:
			delete(m.Labels, c.label)
		case c.label != "":
			m.Labels[c.label] = *c.value
		}
		if got := CountsAsQueued(sealKey, m); got != c.count {
			t.Errorf("%s: counts %v, want %v", c.what, got, c.count)
		}
	}
}

// Without a seal key (no EVENT_SIGNING_KEY) the labels are all there is, as before: a
// queued revision of ours whose status label says pending.
func TestCountsAsQueuedWithoutKey(t *testing.T) {
	s, _, _ := newStore(t)
	reserve(t, s, "web", ActionInstall, "req-web")
	sec, err := s.Client.CoreV1().Secrets("ns").Get(ctx(t), SecretName("web", 1), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !CountsAsQueued(nil, sec) {
		t.Fatalf("an unsealed reservation without a key: not counted (%v)", sec.Labels)
	}
	sec.Labels[LabelStatus] = "deployed"
	if CountsAsQueued(nil, sec) {
		t.Error("without a key, a revision labelled deployed counted")
	}
}

// Every way a reservation or an uninstall mark ends takes it out of the count: Helm's
// rewrite (adoption), MarkFailed before adoption (cancel, supersede, the executor's
// failures, the sweeper), MarkFailed of a mark, MarkUndecodable, Unmark and Undo. A final
// record that kept a sealed queued label would hold a slot for ever.
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
		if want := m.Name == SecretName("queued", 1); CountsAsQueued(sealKey, m) != want {
			t.Errorf("%s (status %s): counts %v, want %v; labels %v", m.Name, m.Labels[LabelStatus], !want, want, m.Labels)
		}
	}
	x := running(t)(NewRevisionIndexWith(c.Metadata(), IndexOptions{SealKey: sealKey}))
	if inNS, total := queuedIn(x, "ns"); inNS != 1 || total != 1 {
		t.Errorf("queued = %d, %d; want 1, 1 (only the one still queued)", inNS, total)
	}
}
