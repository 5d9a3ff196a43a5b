package release

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func TestSecretNameRoundTrip(t *testing.T) {
	for _, tc := range []struct {
		secret   string
		name     string
		revision int
		ok       bool
	}{
		{"sh.helm.release.v1.web.v1", "web", 1, true},
		{"sh.helm.release.v1.web.v12", "web", 12, true},
		// Release names are DNS names: they may hold ".v" themselves.
		{"sh.helm.release.v1.my.v2app.v3", "my.v2app", 3, true},
		{"sh.helm.release.v1.a.v1.v1", "a.v1", 1, true},
		{"sh.helm.release.v1.web", "", 0, false},
		{"sh.helm.release.v1.web.v", "", 0, false},
		{"sh.helm.release.v1.web.v0", "", 0, false},
		{"sh.helm.release.v1.web.v-1", "", 0, false},
		{"sh.helm.release.v1.web.v01", "", 0, false},
		{"sh.helm.release.v1.web.vx", "", 0, false},
		{"sh.helm.release.v1..v1", "", 0, false},
		{"sh.helm.release.v2.web.v1", "", 0, false},
		{"web.v1", "", 0, false},
		{"", "", 0, false},
	} {
		name, rev, ok := ParseSecretName(tc.secret)
		if name != tc.name || rev != tc.revision || ok != tc.ok {
			t.Errorf("ParseSecretName(%q) = %q, %d, %v; want %q, %d, %v", tc.secret, name, rev, ok, tc.name, tc.revision, tc.ok)
		}
		if tc.ok && SecretName(name, rev) != tc.secret {
			t.Errorf("SecretName(%q, %d) = %q, want %q", name, rev, SecretName(name, rev), tc.secret)
		}
	}
	if LeaseName("web", 3) != SecretName("web", 3) {
		t.Errorf("the lease of a revision must carry its secret's name (design: Exactly once)")
	}
}

func TestSelectors(t *testing.T) {
	pending, err := labels.Parse(SelectorPending)
	if err != nil {
		t.Fatal(err)
	}
	all, err := labels.Parse(SelectorReleaseSecrets)
	if err != nil {
		t.Fatal(err)
	}
	one, err := labels.Parse(SelectorRelease("web"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		labels                  labels.Set
		isAll, isPending, isWeb bool
	}{
		{labels.Set{"owner": "helm", "name": "web", "status": "pending-install"}, true, true, true},
		{labels.Set{"owner": "helm", "name": "web", "status": "pending-upgrade"}, true, true, true},
		{labels.Set{"owner": "helm", "name": "db", "status": "pending-rollback"}, true, true, false},
		{labels.Set{"owner": "helm", "name": "web", "status": "deployed"}, true, false, true},
		{labels.Set{"owner": "helm", "name": "web", "status": "failed"}, true, false, true},
		{labels.Set{"owner": "flux", "name": "web", "status": "pending-install"}, false, false, false},
		{labels.Set{"name": "web", "status": "pending-install"}, false, false, false},
	} {
		if got := all.Matches(tc.labels); got != tc.isAll {
			t.Errorf("%s matches %v: %v, want %v", SelectorReleaseSecrets, tc.labels, got, tc.isAll)
		}
		if got := pending.Matches(tc.labels); got != tc.isPending {
			t.Errorf("%s matches %v: %v, want %v", SelectorPending, tc.labels, got, tc.isPending)
		}
		if got := one.Matches(tc.labels); got != tc.isWeb {
			t.Errorf("%s matches %v: %v, want %v", SelectorRelease("web"), tc.labels, got, tc.isWeb)
		}
		if got := pending.Matches(tc.labels); got != (tc.isAll && IsPending(tc.labels["status"])) {
			t.Errorf("SelectorPending and IsPending disagree on %v", tc.labels)
		}
	}
}

func TestActionPendingStatus(t *testing.T) {
	if ActionInstall.PendingStatus() != "pending-install" || ActionUpgrade.PendingStatus() != "pending-upgrade" ||
		ActionRollback.PendingStatus() != "pending-rollback" || ActionUninstall.PendingStatus() != "uninstalling" {
		t.Errorf("pending statuses: %s, %s, %s, %s", ActionInstall.PendingStatus(), ActionUpgrade.PendingStatus(),
			ActionRollback.PendingStatus(), ActionUninstall.PendingStatus())
	}
	// An accepted uninstall is pending: nothing else may start, the sweeper drives it.
	for st, want := range map[string]bool{"pending-install": true, "pending-upgrade": true, "pending-rollback": true,
		"deployed": false, "failed": false, "superseded": false, "uninstalling": true, "uninstalled": false, "": false} {
		if IsPending(st) != want {
			t.Errorf("IsPending(%q) = %v", st, !want)
		}
	}
}

func TestRevisionFromMeta(t *testing.T) {
	created := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	sentAt := created.Add(3 * time.Minute)
	meta := func(l, a map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "sh.helm.release.v1.web.v2", ResourceVersion: "7",
			CreationTimestamp: metav1.NewTime(created), Labels: l, Annotations: a}}
	}
	helm := func(extra map[string]string) map[string]string {
		l := map[string]string{"owner": "helm", "name": "web", "status": "pending-upgrade", "version": "2"}
		for k, v := range extra {
			l[k] = v
		}
		return l
	}
	for _, tc := range []struct {
		name string
		m    *metav1.PartialObjectMetadata
		ok   bool
		want Revision
	}{
		{"not helm's", meta(map[string]string{"owner": "flux", "name": "web", "version": "2"}, nil), false, Revision{}},
		{"no name", meta(map[string]string{"owner": "helm", "version": "2"}, nil), false, Revision{}},
		{"bad version", meta(map[string]string{"owner": "helm", "name": "web", "version": "two"}, nil), false, Revision{}},
		{"plain helm", meta(helm(nil), nil), true, Revision{Namespace: "ns", Name: "web", Status: "pending-upgrade", Version: 2,
			SecretName: "sh.helm.release.v1.web.v2", ResourceVersion: "7", Created: created}},
		{"ours, queued, re-sent, dead-lettered", meta(
			helm(map[string]string{LabelRevision: "2", LabelQueued: "true", LabelRequestID: "r1", LabelChart: "tiny-1.0.0"}),
			map[string]string{AnnotationNotified: "pending-upgrade", AnnotationSent: "3", AnnotationSentAt: sentAt.Format(time.RFC3339Nano),
				AnnotationDeadLettered: "2026-12-01T10:05:00Z"}),
			true, Revision{Namespace: "ns", Name: "web", Status: "pending-upgrade", Version: 2, RequestID: "r1",
				SecretName: "sh.helm.release.v1.web.v2", ResourceVersion: "7", Chart: "tiny-1.0.0", Notified: "pending-upgrade",
				Ours: true, Queued: true, Sent: 3, SentAt: sentAt, DeadLettered: true, Created: created}},
		// Helm copies our labels into the revisions the helm CLI writes on top of ours:
		// an older number is not ours.
		{"copied labels of an older revision", meta(helm(map[string]string{LabelRevision: "1", LabelQueued: "true"}), nil),
			true, Revision{Namespace: "ns", Name: "web", Status: "pending-upgrade", Version: 2,
				SecretName: "sh.helm.release.v1.web.v2", ResourceVersion: "7", Queued: true, Created: created}},
		// Helm's uninstall keeps our labels on the revision it marks: only our own mark
		// (the action label) makes an uninstalling revision ours to drive.
		{"our uninstall", meta(helm(map[string]string{"status": "uninstalling", LabelRevision: "2", LabelAction: "uninstall", LabelModifiedAt: "1764583200"}), nil),
			true, Revision{Namespace: "ns", Name: "web", Status: "uninstalling", Version: 2,
				SecretName: "sh.helm.release.v1.web.v2", ResourceVersion: "7", Ours: true, Created: time.Unix(1764583200, 0)}},
		{"a hand-run helm uninstall of our revision", meta(helm(map[string]string{"status": "uninstalling", LabelRevision: "2", LabelModifiedAt: "1764583200"}), nil),
			true, Revision{Namespace: "ns", Name: "web", Status: "uninstalling", Version: 2,
				SecretName: "sh.helm.release.v1.web.v2", ResourceVersion: "7", Created: time.Unix(1764583200, 0)}},
		{"queued only when true", meta(helm(map[string]string{LabelRevision: "2", LabelQueued: "yes"}), nil),
			true, Revision{Namespace: "ns", Name: "web", Status: "pending-upgrade", Version: 2,
				SecretName: "sh.helm.release.v1.web.v2", ResourceVersion: "7", Ours: true, Created: created}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := RevisionFromMeta(tc.m)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if !got.SentAt.Equal(tc.want.SentAt) {
				t.Errorf("SentAt = %v, want %v", got.SentAt, tc.want.SentAt)
			}
			got.SentAt, tc.want.SentAt = time.Time{}, time.Time{}
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestLabels(t *testing.T) {
	got := Labels("req-1", 3, "tiny", "1.0.0")
	want := map[string]string{LabelRequestID: "req-1", LabelRevision: "3", LabelChart: "tiny-1.0.0"}
	if len(got) != len(want) {
		t.Fatalf("Labels = %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("Labels[%s] = %q, want %q", k, got[k], v)
		}
	}
	// A chart whose name and version make no valid label value gets no chart label rather
	// than a secret the API server refuses.
	long := Labels("req-1", 1, "a-very-long-chart-name-that-goes-on-and-on-and-on-beyond-the-limit", "1.0.0")
	if _, ok := long[LabelChart]; ok {
		t.Errorf("a label value over 63 characters was kept: %q", long[LabelChart])
	}
	if ChartLabel("tiny", "1.0.0") != "tiny-1.0.0" || ChartLabel("bad chart", "1") != "" {
		t.Errorf("ChartLabel: %q, %q", ChartLabel("tiny", "1.0.0"), ChartLabel("bad chart", "1"))
	}
}

func TestPendingError(t *testing.T) {
	err := error(&PendingError{Revision: 4, Status: "pending-upgrade"})
	if err.Error() != "an operation is already pending on the release: revision 4 is pending-upgrade" {
		t.Errorf("message: %s", err)
	}
	if !isErr(err, ErrPending) || isErr(err, ErrNameInUse) {
		t.Errorf("errors.Is: pending %v, name in use %v", isErr(err, ErrPending), isErr(err, ErrNameInUse))
	}
}
