package main

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/async-helm/async-helm/internal/testcluster"
	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/ledger"
)

// A bench namespace's purge deletes the ledger entries of the requests accepted there (no
// executor consumes them, and every submit of the shared cluster counts them against
// MAX_QUEUED), and no other namespace's.
func TestPurgeDeletesTheNamespacesLedgerEntries(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientset()
	l := &ledger.Store{Client: c, Namespace: testcluster.OwnNamespace}
	e := func(id, ns string) ledger.Entry {
		return ledger.Entry{RequestID: id, Namespace: ns, SecretName: "s", At: time.Now()}
	}
	for _, en := range []ledger.Entry{e("a", "bench-cpu-1"), e("b", "bench-cpu-1"), e("c", "someone-else")} {
		if err := l.Add(ctx, en); err != nil {
			t.Fatal(err)
		}
	}
	// Group commits: a batch all of the namespace goes, one that holds another's stays.
	if _, err := l.AddBatch(ctx, []ledger.Entry{e("d", "bench-cpu-1"), e("e", "bench-cpu-1")}); err != nil {
		t.Fatal(err)
	}
	mixed, err := l.AddBatch(ctx, []ledger.Entry{e("f", "bench-cpu-1"), e("g", "someone-else")})
	if err != nil {
		t.Fatal(err)
	}
	b := &bench{cl: &kube.Clients{Typed: c}}
	b.purge("bench-cpu-1")
	left, err := c.CoordinationV1().Leases(testcluster.OwnNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, l := range left.Items {
		names = append(names, l.Name)
	}
	slices.Sort(names)
	if want := []string{ledger.Name("c"), mixed}; !slices.Equal(names, want) {
		t.Errorf("ledger Leases left: %v, want someone-else's %v", names, want)
	}
}
