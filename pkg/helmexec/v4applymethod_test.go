package helmexec

import (
	"io"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	kube4 "helm.sh/helm/v4/pkg/kube"
	kubefake4 "helm.sh/helm/v4/pkg/kube/fake"

	"github.com/async-helm/async-helm/pkg/release"
)

// optionCheckingKube is Helm v4's printing fake with the real client's check of an
// update's options (Helm v4's Client.Update refuses invalid ones before any request).
type optionCheckingKube struct{ kubefake4.PrintingKubeClient }

func (k *optionCheckingKube) Update(original, target kube4.ResourceList, o ...kube4.ClientUpdateOption) (*kube4.Result, error) {
	if res, err := (&kube4.Client{}).Update(kube4.ResourceList{}, kube4.ResourceList{}, o...); err != nil {
		return res, err
	}
	return k.PrintingKubeClient.Update(original, target, o...)
}

// force_conflicts with server_side "auto" forces only where auto resolves to server-side:
// on a release last applied client-side the upgrade and the rollback apply client-side,
// which Helm v4 refuses with a force ("forceConflicts enabled when serverSideApply disabled").
func TestAutoWithForceConflictsOnAClientSideRelease(t *testing.T) {
	f, mem, opts := offlineV4(t)
	opts = append(opts, WithV4KubeClient(&optionCheckingKube{kubefake4.PrintingKubeClient{Out: io.Discard}}))
	reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
	if _, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: tiny("1.0.0"),
		Labels: release.Labels("r1", 1, "tiny", "1.0.0")}, opts...); err != nil { // client-side, the default
		t.Fatalf("install: %v", err)
	}
	reserve(t, mem, "web", 2, helmrelease.StatusPendingUpgrade)
	rel, err := f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2, Values: map[string]any{"v": "two"},
		ServerSide: "auto", ForceConflicts: true, Labels: release.Labels("r2", 2, "tiny", "1.0.0")}, opts...)
	if err != nil || rel.Info.Status != helmrelease.StatusDeployed {
		t.Fatalf("upgrade, auto and force_conflicts, over a client-side release: %v %v", describeRel(rel), err)
	}
	reserve(t, mem, "web", 3, helmrelease.StatusPendingRollback)
	rel, err = f.Rollback(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 3, RollbackTo: 1, RollbackPin: pinOf(t, mem, 1),
		ServerSide: "auto", ForceConflicts: true, Labels: release.Labels("r3", 3, "tiny", "1.0.0")}, opts...)
	if err != nil || rel.Info.Status != helmrelease.StatusDeployed {
		t.Fatalf("rollback, auto and force_conflicts, to a client-side revision: %v %v", describeRel(rel), err)
	}
}
