package chaos

import (
	"context"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/release"
)

// An executor starved past its Lease loses it to another while its run goes on: killed
// then, before its "action finished" line, its run leaves a deployed revision no log
// speaks of, and a Lease that names the other executor (which found the revision final
// and ran nothing). The Leases listed at the kill miss it; the killed executor held it.
func TestKilledRunsCountALeaseTakenOverBeforeTheKill(t *testing.T) {
	ctx := context.Background()
	cl := fake.NewClientset()
	watched, err := watchHolders(ctx, cl, "ns")
	if err != nil {
		t.Fatal(err)
	}
	defer watched.stop()
	leases := cl.CoordinationV1().Leases("ns")
	lease := func(name, holder string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}
	}
	s71, s72, s73 := release.SecretName("s71", 1), release.SecretName("s72", 1), release.SecretName("s73", 1)
	for _, l := range []*coordinationv1.Lease{lease(s71, "executor-0/a1"), lease(s72, "executor-0/b2"), lease(s73, "executor-10/c3")} {
		if _, err := leases.Create(ctx, l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := leases.Update(ctx, lease(s71, "executor-1/d4"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, func() bool { return len(watched.heldBy("executor-1")) == 1 })

	r := &run{cl: &kube.Clients{Typed: cl}, rep: &Report{}}
	cut, held := r.killedRuns(ctx, "ns", "executor-0", watched)
	if len(cut) != 1 || !cut[s72] {
		t.Errorf("cut %v, want only %s (its Lease still names executor-0)", cut, s72)
	}
	if len(held) != 2 || !held[s71] || !held[s72] {
		t.Errorf("held %v, want %s (taken over before the kill) and %s", held, s71, s72)
	}

	// s71 ended deployed and no executor logged a run of it: the killed executor's.
	revs := map[string][]release.Revision{"s71": {{Name: "s71", Version: 1, Status: "deployed", SecretName: s71}}}
	r.checkRuns(revs, []string{"s71"}, map[string]int{}, held)
	if len(r.rep.Violations) != 0 {
		t.Errorf("violations %v, want none", r.rep.Violations)
	}
	r.checkRuns(revs, []string{"s71"}, map[string]int{}, cut)
	if len(r.rep.Violations) != 1 {
		t.Errorf("violations %v; with the Leases listed at the kill, want s71's", r.rep.Violations)
	}
}
