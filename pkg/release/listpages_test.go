package release

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	metadatafake "k8s.io/client-go/metadata/fake"
	k8stesting "k8s.io/client-go/testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
)

// floodMeta is a tenant's Secret labelled owner=helm with 200 async-helm.io/ labels and 60
// annotations of 4 KiB (a metadata flood), no payload.
func floodMeta(i int) metav1.ObjectMeta {
	m := metav1.ObjectMeta{Name: SecretName(fmt.Sprintf("flood-%d", i), 1), Namespace: "ns", UID: types.UID("u-" + strconv.Itoa(i)),
		Labels:      map[string]string{LabelOwner: OwnerHelm, LabelName: fmt.Sprintf("flood-%d", i), LabelVersion: "1", LabelStatus: "deployed"},
		Annotations: map[string]string{}}
	for l := range 200 {
		m.Labels[fmt.Sprintf("%sl-%d", ownPrefixForTest, l)] = strings.Repeat("v", 63)
	}
	for a := range 60 {
		m.Annotations[fmt.Sprintf("%sa-%d", ownPrefixForTest, a)] = strings.Repeat("a", 4<<10)
	}
	return m
}

// pager answers list actions from n flood Secrets, a page of opts.Limit at a time (all of
// them without a limit, as one read did), and records each request's limit.
type pager struct {
	n      int
	limits []int64
	object func(metav1.ObjectMeta) runtime.Object
	list   func(items []runtime.Object, next string) runtime.Object
}

func (p *pager) react(a k8stesting.Action) (bool, runtime.Object, error) {
	opts := a.(k8stesting.ListActionImpl).ListOptions
	p.limits = append(p.limits, opts.Limit)
	from, _ := strconv.Atoi(opts.Continue)
	to := p.n
	if opts.Limit > 0 {
		to = min(from+int(opts.Limit), p.n)
	}
	var items []runtime.Object
	for i := from; i < to; i++ {
		items = append(items, p.object(floodMeta(i)))
	}
	next := ""
	if to < p.n {
		next = strconv.Itoa(to)
	}
	return true, p.list(items, next), nil
}

// checkPaged checks that every request read at most listPage Secrets.
func (p *pager) checkPaged(t *testing.T, what string) {
	t.Helper()
	if want := (p.n + listPage - 1) / listPage; len(p.limits) != want {
		t.Errorf("%s: %d requests, want %d pages of %d", what, len(p.limits), want, listPage)
	}
	for _, l := range p.limits {
		if l <= 0 || l > listPage {
			t.Errorf("%s: a request with limit %d read the whole namespace at once, want pages of %d", what, l, listPage)
			break
		}
	}
}

func secretsPager(n int) *pager {
	return &pager{n: n,
		object: func(m metav1.ObjectMeta) runtime.Object {
			return &corev1.Secret{ObjectMeta: m, Type: SecretType, Data: map[string][]byte{"release": []byte("x"), "other": make([]byte, 64<<10)}}
		},
		list: func(items []runtime.Object, next string) runtime.Object {
			l := &corev1.SecretList{ListMeta: metav1.ListMeta{Continue: next}}
			for _, o := range items {
				l.Items = append(l.Items, *o.(*corev1.Secret))
			}
			return l
		}}
}

// A tenant floods its namespace with Secrets labelled owner=helm that carry ~250 KiB of
// metadata each; the lists of that namespace (submit's list and its limitInfo list, Helm's
// list through the guarded driver, the notifier's catch-up) read it in pages and keep of
// each only what the index keeps. Each read of the namespace held all of it at once, and
// kept it whole (submit reached 483 MiB of its 512 Mi with four lists of 200 such Secrets).
func TestListsOfAFloodedNamespaceReadPagesAndKeepLittle(t *testing.T) {
	const n = 120
	ctx := context.Background()

	secrets := secretsPager(n)
	client := fake.NewClientset()
	client.PrependReactor("list", "secrets", secrets.react)
	got, err := (&Store{Client: client}).ReleaseHeads(ctx, "ns")
	if err != nil || len(got) != n {
		t.Fatalf("ReleaseHeads: %d secrets, %v; want %d", len(got), err, n)
	}
	secrets.checkPaged(t, "ReleaseHeads")
	checkKept(t, "ReleaseHeads", len(got), func(i int) any { return got[i].ObjectMeta })
	if got[0].Release != nil || got[0].Err == nil {
		t.Errorf("ReleaseHeads kept a head of a Secret that does not decode")
	}

	metas := &pager{n: n,
		object: func(m metav1.ObjectMeta) runtime.Object { return &metav1.PartialObjectMetadata{ObjectMeta: m} },
		list: func(items []runtime.Object, next string) runtime.Object {
			l := &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{Continue: next}}
			for _, o := range items {
				l.Items = append(l.Items, *o.(*metav1.PartialObjectMetadata))
			}
			return l
		}}
	md := pagedMetadata{Interface: metadatafake.NewSimpleMetadataClient(metadatafake.NewTestScheme()), p: metas}
	ms, err := (&Store{Metadata: md}).ReleaseMetas(ctx, "ns")
	if err != nil || len(ms) != n {
		t.Fatalf("ReleaseMetas: %d, %v; want %d", len(ms), err, n)
	}
	metas.checkPaged(t, "ReleaseMetas")
	checkKept(t, "ReleaseMetas", len(ms), func(i int) any { return ms[i] })
	if rev, ok := RevisionFromMeta(ms[0]); !ok || rev.Name != "flood-0" || rev.Version != 1 {
		t.Errorf("the kept metadata lost the revision: %+v, %v", rev, ok)
	}

	helmList := secretsPager(n)
	hc := fake.NewClientset()
	hc.PrependReactor("list", "secrets", helmList.react)
	d := GuardedSecrets(hc.CoreV1().Secrets("ns"))
	d.Log = func(string, ...any) {}
	if _, err := d.List(func(*helmrelease.Release) bool { return true }); err != nil {
		t.Fatal(err)
	}
	helmList.checkPaged(t, "the guarded driver's List")
}

// checkKept checks that each of n kept objects holds at most the index's bound of metadata.
func checkKept(t *testing.T, what string, n int, kept func(i int) any) {
	t.Helper()
	total := 0
	for i := range n {
		b, err := json.Marshal(kept(i))
		if err != nil {
			t.Fatal(err)
		}
		total += len(b)
	}
	if per := total / n; per > maxIndexedBytes+1<<10 {
		t.Errorf("%s keeps %d bytes of each flooded Secret, want at most %d", what, per, maxIndexedBytes+1<<10)
	}
}

// pagedMetadata answers metadata lists from p with the options as given (the fake metadata
// client drops a list's limit and continue token).
type pagedMetadata struct {
	metadata.Interface
	p *pager
}

func (m pagedMetadata) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return pagedGetter{Getter: m.Interface.Resource(gvr), p: m.p}
}

type pagedGetter struct {
	metadata.Getter
	p *pager
}

func (g pagedGetter) Namespace(ns string) metadata.ResourceInterface {
	return pagedResource{ResourceInterface: g.Getter.Namespace(ns), p: g.p}
}

type pagedResource struct {
	metadata.ResourceInterface
	p *pager
}

func (r pagedResource) List(_ context.Context, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	_, obj, err := r.p.react(k8stesting.ListActionImpl{ListOptions: opts})
	if err != nil {
		return nil, err
	}
	return obj.(*metav1.PartialObjectMetadataList), nil
}
