package main

import (
	"context"
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
	for i, ns := range []string{"bench-cpu-1", "bench-cpu-1", "someone-else"} {
		e := ledger.Entry{RequestID: string(rune('a' + i)), Namespace: ns, SecretName: "s", At: time.Now()}
		if err := l.Add(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	b := &bench{cl: &kube.Clients{Typed: c}}
	b.purge("bench-cpu-1")
	left, err := c.CoordinationV1().Leases(testcluster.OwnNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 1 || left.Items[0].Annotations[ledger.AnnNamespace] != "someone-else" {
		var names []string
		for _, l := range left.Items {
			names = append(names, l.Name+" of "+l.Annotations[ledger.AnnNamespace])
		}
		t.Errorf("ledger entries left: %v, want only someone-else's", names)
	}
}
