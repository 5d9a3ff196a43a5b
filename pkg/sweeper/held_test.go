package sweeper

import (
	"fmt"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release"
)

// A namespace editor writes the queued label (and the seal Helm's rewrite kept) back onto
// its finished record: it counts toward MAX_QUEUED again, and the sweeper, which reads only
// records labelled pending, never looked at it. The pass over held slots drops the label.
func TestSweepFreesTheSlotOfAFinishedRecordRelabelledQueued(t *testing.T) {
	e := newEnv(t)
	e.store.SealKey = signingKey
	e.Reserve("web", release.ActionInstall, 1)
	e.Set("web", 1, helmrelease.StatusDeployed, "Install complete")
	e.Patch("web", 1, `{"metadata":{"labels":{"`+release.LabelQueued+`":"true"}}}`)
	if !release.CountsAsQueued(signingKey, e.Meta("web", 1)) {
		t.Fatal("setup: the relabelled record does not count")
	}
	res, err := e.sw.SweepOnce(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if release.CountsAsQueued(signingKey, e.Meta("web", 1)) || res.Unqueued != 1 {
		t.Fatalf("after a sweep: still counts %v, %+v; labels %v", release.CountsAsQueued(signingKey, e.Meta("web", 1)), res, e.Meta("web", 1).Labels)
	}
	if st, _ := e.Status("web", 1); st != helmrelease.StatusDeployed {
		t.Errorf("the record itself was changed: %s", st)
	}
}

// The labels alone make the slot: a sealed record re-made with no payload, or one that
// does not decode, is freed the same way (nothing is decoded), and so is a waiting
// reservation whose status label was flipped (its event then fails unrun). A record seen
// at an older resourceVersion is read again and decided on as it is now: still held, it is
// freed (left to the next pass, a tenant rewriting faster than the index kept it).
func TestSweepFreesHeldSlotsWhateverTheirPayload(t *testing.T) {
	e := newEnv(t)
	e.store.SealKey = signingKey
	for _, name := range []string{"empty", "garbage", "flipped"} {
		e.Reserve(name, release.ActionInstall, 1)
	}
	e.Patch("empty", 1, `{"metadata":{"labels":{"status":"failed"}},"data":{"release":null}}`)
	e.Patch("garbage", 1, `{"metadata":{"labels":{"status":"deployed"}},"data":{"release":"Z2FyYmFnZQ=="}}`)
	e.Patch("flipped", 1, `{"metadata":{"labels":{"status":"deployed"}}}`)
	res, err := e.sw.SweepOnce(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"empty", "garbage", "flipped"} {
		if release.CountsAsQueued(signingKey, e.Meta(name, 1)) {
			t.Errorf("%s still counts as queued: %v", name, e.Meta(name, 1).Labels)
		}
	}
	if res.Unqueued != 3 {
		t.Errorf("unqueued %d, want 3", res.Unqueued)
	}
	e.Reserve("late", release.ActionInstall, 1)
	e.Patch("late", 1, `{"metadata":{"labels":{"status":"deployed"}}}`)
	stale := e.Meta("late", 1)
	e.Patch("late", 1, `{"metadata":{"annotations":{"touched":"yes"}}}`)
	if ok, err := e.store.UnqueueHeld(ctx(t), release.HeldSlot{Namespace: "ns", SecretName: stale.Name, ResourceVersion: stale.ResourceVersion}); !ok || err != nil ||
		release.CountsAsQueued(signingKey, e.Meta("late", 1)) {
		t.Errorf("UnqueueHeld at a stale resourceVersion = %v, %v (labels %v); want true, nil, the queued label dropped", ok, err, e.Meta("late", 1).Labels)
	}
}

// A sealed queued reservation whose labels a tenant moved to another version (version and
// revision 2 on web.v1) is no pending revision of ours: the sweeper would have failed web
// v2, which does not exist, and web v1 kept its MAX_QUEUED slot for ever. Its slot is
// freed at the next pass (hostile-tenant review).
func TestRelabelledVersionDoesNotHoldASlot(t *testing.T) {
	e := newEnv(t)
	e.store.SealKey = signingKey
	e.Reserve("web", release.ActionInstall, 1)
	if !release.CountsAsQueued(signingKey, e.Meta("web", 1)) {
		t.Fatal("the reservation does not count as queued")
	}
	e.Patch("web", 1, fmt.Sprintf(`{"metadata":{"labels":{"version":"2",%q:"2"}}}`, release.LabelRevision))
	res, err := e.sw.SweepOnce(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if release.CountsAsQueued(signingKey, e.Meta("web", 1)) || res.Unqueued != 1 {
		t.Errorf("swept %+v: the relabelled reservation still counts toward MAX_QUEUED", res)
	}
}
