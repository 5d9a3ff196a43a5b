package submitter

import (
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// A cancel failed the revision its history's version label named, and that label is the
// tenant's: moved to 9 on a queued install, the cancel failed "revision 9" (no such record),
// answered failed for revision 9, and left the record it had read, and bound, pending-install.
// It now acts on the record it read (its version from its Secret's name) and reports it.
func TestCancelFailsAndReportsTheRecordItRead(t *testing.T) {
	e, _ := cancelEnv(t)
	acc, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil)
	if err != nil {
		t.Fatal(err)
	}
	patch := `{"metadata":{"labels":{"` + release.LabelVersion + `":"9"}}}`
	if _, err := e.c.CoreV1().Secrets("ns").Patch(ctx(t), acc.Secret.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	out, err := e.svc.Cancel(ctx(t), "ns", "web", nil)
	if err != nil {
		t.Fatal(err)
	}
	rel, err := e.store.Get(ctx(t), "ns", "web", 1)
	if err != nil {
		t.Fatal(err)
	}
	if out.Revision != 1 || out.Status != "failed" || rel.Info.Status != helmrelease.StatusFailed {
		t.Errorf("cancel answered revision %d %s; the record read (revision 1) is %s: want revision 1 failed, as answered",
			out.Revision, out.Status, rel.Info.Status)
	}
}

// A Secret of another release labelled with this release's name, as its newest revision,
// is none of its records. The cancel of web took release other's Lease and bound other's
// accepted request with the outcome cancelled (its delivery would be refused: a 201 broken
// by a cancel of another release), and answered failed for a "revision 9" of web, leaving
// web's own queued revision pending. It now cancels web's revision 1 and leaves other alone.
func TestCancelIgnoresAnotherReleasesSecretLabelledWithItsName(t *testing.T) {
	e, bindings := cancelEnv(t)
	ids := []string{"req-web", "req-other"}
	e.svc.NewID = func() string { id := ids[0]; ids = ids[1:]; return id }
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil); err != nil {
		t.Fatal(err)
	}
	other := installLabelledAsWeb9(t, e)
	out, err := e.svc.Cancel(ctx(t), "ns", "web", nil)
	if err != nil || out.Revision != 1 || out.Status != "failed" {
		t.Errorf("cancel of web = %+v, %v; want its revision 1 failed", out, err)
	}
	if rel, err := e.store.Get(ctx(t), "ns", "other", 1); err != nil || rel.Info.Status != helmrelease.StatusPendingInstall {
		t.Errorf("release other after a cancel of web: %v, %v; want it left pending-install", rel.Info.Status, err)
	}
	if r, err := bindings.Lookup(ctx(t), other.RequestID); err != nil || r != nil {
		t.Errorf("release other's request after a cancel of web: %+v, %v; want it unbound (free to run)", r, err)
	}
}

// The same decoy before an upgrade with supersede: the supersede took release other's
// Secret, labelled as web's newest revision, for the revision it replaces, and bound
// other's accepted request with the outcome cancelled (it would never run), while web's own
// pending revision stayed pending. It now supersedes web's own pending revision only.
func TestSupersedeIgnoresAnotherReleasesSecretLabelledWithItsName(t *testing.T) {
	e := supersedeEnv(t) // web: revision 1 deployed, 2 pending-upgrade (req-1)
	bindings := &consumed.Store{Client: e.c, Namespace: "async-helm", Clock: e.svc.Clock}
	e.svc.Bindings = bindings
	other := installLabelledAsWeb9(t, e)
	acc, err := e.svc.Submit(ctx(t), release.ActionUpgrade, superseding("web"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, err := bindings.Lookup(ctx(t), other.RequestID); err != nil || r != nil {
		t.Errorf("release other's request after a supersede of web: %+v, %v; want it unbound (free to run)", r, err)
	}
	if st, _ := e.status("web", 2); acc.Revision != 3 || st != helmrelease.StatusFailed {
		t.Errorf("the supersede reserved revision %d and left web's revision 2 %s; want 3 reserved, 2 failed", acc.Revision, st)
	}
}

// installLabelledAsWeb9 accepts an install of release other and relabels its reservation
// as web's revision 9, as a namespace editor can.
func installLabelledAsWeb9(t *testing.T, e *env) *Accepted {
	t.Helper()
	other, err := e.svc.Submit(ctx(t), release.ActionInstall, install("other"), nil)
	if err != nil {
		t.Fatal(err)
	}
	patch := `{"metadata":{"labels":{"` + release.LabelName + `":"web","` + release.LabelVersion + `":"9"}}}`
	if _, err := e.c.CoreV1().Secrets("ns").Patch(ctx(t), other.Secret.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	return other
}
