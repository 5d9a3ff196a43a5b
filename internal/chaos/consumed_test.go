package chaos

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// A deployed revision is proven by its request's consumed record in async-helm's namespace:
// bound to its Secret, with its status as outcome or none yet.
func TestCheckConsumedWantsEveryRevisionBoundToItsRun(t *testing.T) {
	ctx := context.Background()
	cl := fake.NewClientset()
	store := &consumed.Store{Client: cl, Namespace: "own"}
	bind := func(id string, uid types.UID, outcome string) {
		if _, err := store.Consume(ctx, consumed.Record{RequestID: id, Namespace: "ns", Name: id, Action: "install", Revision: 1, SecretUID: uid}); err != nil {
			t.Fatal(err)
		}
		if outcome != "" {
			if err := store.MarkDone(ctx, id, outcome); err != nil {
				t.Fatal(err)
			}
		}
	}
	bind("done", "uid-done", "deployed")
	bind("cut", "uid-cut", "")
	bind("elsewhere", "uid-other", "deployed")
	bind("rewritten", "uid-rewritten", "refused: reservation rewritten")
	revs := map[string][]release.Revision{}
	for _, id := range []string{"done", "cut", "elsewhere", "rewritten", "unbound"} {
		revs[id] = []release.Revision{{Name: id, Version: 1, Status: "deployed", RequestID: id, UID: types.UID("uid-" + id)}}
	}
	r := &run{cl: &kube.Clients{Typed: cl}, rep: &Report{}, own: "own"}
	bound := r.checkConsumed(ctx, revs, []string{"done", "cut", "elsewhere", "rewritten", "unbound"})
	if bound != 2 {
		t.Errorf("%d revisions bound to their run, want 2 (done, cut)", bound)
	}
	want := []string{"elsewhere revision 1 is deployed and its request is bound to another Secret",
		`rewritten revision 1 is deployed and its request's recorded outcome is "refused: reservation rewritten"`,
		"unbound revision 1 is deployed and its request unbound was never consumed"}
	if len(r.rep.Violations) != len(want) {
		t.Fatalf("violations %q, want %d", r.rep.Violations, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(r.rep.Violations[i], w) {
			t.Errorf("violation %q, want %q...", r.rep.Violations[i], w)
		}
	}
}
