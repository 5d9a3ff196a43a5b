package release

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	helmrelease "helm.sh/helm/v3/pkg/release"
)

// The budget is shared fairly by the namespaces of a read: records arrive namespace by
// namespace, and each namespace keeps what it needs up to an equal share.
func TestAReadBudgetIsSharedFairlyByNamespace(t *testing.T) {
	const n = 100 // nodes of each record
	for _, tc := range []struct {
		name    string
		budget  int      // nodes
		records []string // namespace of each record, in the order read
		want    map[string]int
	}{
		{"one namespace keeps what fits", 450, []string{"a", "a", "a", "a", "a", "a"}, map[string]int{"a": 4}},
		{"a namespace read later gets its share", 450, []string{"a", "a", "a", "a", "a", "a", "z", "z"}, map[string]int{"a": 2, "z": 2}},
		{"what one leaves, the others use", 1000, []string{"a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "a", "z"}, map[string]int{"a": 9, "z": 1}},
		{"three namespaces, one hostile", 600, []string{"m", "m", "m", "m", "m", "m", "m", "a", "b"}, map[string]int{"a": 1, "b": 1, "m": 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newReadBudget(readBudget{bytes: MaxReadBytes, nodes: tc.budget})
			var all []*helmrelease.Release
			for i, ns := range tc.records {
				if bound, ok := b.room(ns); !ok || bound.nodes < n {
					continue // as readWithin: over the namespace's room
				}
				r := &helmrelease.Release{Name: fmt.Sprint("r", i), Namespace: ns, Info: &helmrelease.Info{}}
				all = append(all, r)
				b.keep(ns, r, readBudget{bytes: 10, nodes: n})
			}
			got := map[string]int{}
			for _, r := range b.Kept(all) {
				got[r.Namespace]++
			}
			if fmt.Sprint(got) != fmt.Sprint(tc.want) {
				t.Errorf("kept %v, want %v", got, tc.want)
			}
		})
	}
}

// manyNamespaces serves release records of several namespaces in one list, in the order given.
type manyNamespaces struct {
	typedcorev1.SecretInterface
	items []corev1.Secret
}

func (r manyNamespaces) List(context.Context, metav1.ListOptions) (*corev1.SecretList, error) {
	return &corev1.SecretList{Items: r.items}, nil
}

// One read of every namespace (an all-namespaces list) shares its budget fairly: a
// namespace listed first whose records fill the budget leaves a share to the namespaces
// after it (H8: it left them nothing).
func TestOneReadOfManyNamespacesLeavesEachItsShare(t *testing.T) {
	var items []corev1.Secret
	nodes := 0
	add := func(ns string, count int) {
		for v := 1; v <= count; v++ {
			js := fmt.Sprintf(`{"name":"web","namespace":%q,"version":%d,"info":{"status":"superseded"},`+
				`"chart":{"metadata":{"name":"tiny","version":"1.0.0"}},"config":{"a":[%s0]}}`, ns, v, strings.Repeat("0,", 1000))
			nodes = jsonNodes([]byte(js), MaxRecordNodes)
			items = append(items, corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: SecretName("web", v), Namespace: ns},
				Data: map[string][]byte{"release": gzipped(t, []byte(js))}})
		}
	}
	add("aaa-hostile", 6)
	add("zzz-other", 1)
	d := GuardedSecrets(manyNamespaces{items: items})
	d.Log = func(string, ...any) {}
	rels, err := d.readWithin(SelectorReleaseSecrets, newReadBudget(readBudget{bytes: MaxReadBytes, nodes: 4*nodes + nodes/2}))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range rels {
		got[r.Namespace]++
	}
	if got["zzz-other"] != 1 || got["aaa-hostile"] != 3 {
		t.Errorf("kept %v of a read of 4.5 records' nodes, want zzz-other's 1 and aaa-hostile's 3", got)
	}
}
