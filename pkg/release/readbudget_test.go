package release

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// manyNamespaces serves release records of several namespaces in one list, in the order given.
type manyNamespaces struct {
	typedcorev1.SecretInterface
	items []corev1.Secret
}

func (r manyNamespaces) List(context.Context, metav1.ListOptions) (*corev1.SecretList, error) {
	return &corev1.SecretList{Items: r.items}, nil
}

// One read of every namespace (an all-namespaces list) keeps what fits of its budget and
// counts what it left out, whichever namespace it was of: the reader refuses such a read
// whole rather than answer it without them.
func TestOneReadOfManyNamespacesCountsWhatItLeftOut(t *testing.T) {
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
	b := &ReadBudget{bound: readBudget{bytes: MaxReadBytes, nodes: 4*nodes + nodes/2}}
	rels, err := d.readWithin(SelectorReleaseSecrets, b)
	if err != nil {
		t.Fatal(err)
	}
	if len(rels) != 4 || b.Over() != 3 {
		t.Errorf("kept %d and left out %d of a read of 4.5 records' nodes, want 4 and 3", len(rels), b.Over())
	}
}
