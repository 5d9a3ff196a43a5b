package reader

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// fiftyNamespaces is a cluster of 50 namespaces with two releases each, and the static
// metadata index of their records (so every read the cluster records is a read of a body).
func fiftyNamespaces(t *testing.T) (*fakekube.Cluster, metaIndex) {
	t.Helper()
	cl := fakekube.New(fakekube.NewClock(time.Now()))
	for i := 0; i < 50; i++ {
		ns := fmt.Sprintf("ns-%02d", i)
		d := storage.NewSecrets(cl.Typed().CoreV1().Secrets(ns))
		for _, r := range []*helmrelease.Release{rel(ns, "web", 1, helmrelease.StatusDeployed), rel(ns, "db", 1, helmrelease.StatusFailed)} {
			if err := d.Create(release.SecretName(r.Name, r.Version), r); err != nil {
				t.Fatal(err)
			}
		}
	}
	list, err := cl.Typed().CoreV1().Secrets("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var idx metaIndex
	for i := range list.Items {
		idx = append(idx, &metav1.PartialObjectMetadata{ObjectMeta: list.Items[i].ObjectMeta})
	}
	cl.ClearActions()
	return cl, idx
}

// recordingHelm records the namespaces Helm's list ran over.
type recordingHelm struct {
	Helm
	listed []string
}

func (h *recordingHelm) List(_ context.Context, ns string, _ ...helmexec.Option) ([]*helmrelease.Release, error) {
	h.listed = append(h.listed, ns)
	return []*helmrelease.Release{rel(ns, "web", 1, helmrelease.StatusDeployed)}, nil
}

// A caller who may read 1 of 50 namespaces makes the all-namespaces list read and decode
// that namespace's records only: the namespaces come from the metadata index, each is
// reviewed, and no body of another namespace is fetched (submit's own rights must not do
// cluster-wide work for a caller who could not).
func TestAllNamespacesListReadsOnlyReadableNamespaces(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, idx := fiftyNamespaces(t)
	a := &authz{may: map[string]map[string]bool{"alice": {"ns-07": true}}}
	helm := &recordingHelm{}
	s := &Service{Helm: helm, Secrets: &release.Store{Client: cl.Typed()}, Index: idx, Authorizer: a}
	alice := &auth.User{Name: "alice"}

	out, err := s.List(ctx, alice, "", true)
	if err != nil {
		t.Fatal(err)
	}
	infos := out.([]api.ReleaseInfo)
	if len(infos) != 2 || infos[0].Namespace != "ns-07" || infos[1].Namespace != "ns-07" {
		t.Errorf("lean list %+v, want ns-07's two releases", infos)
	}
	reads := 0
	for _, act := range cl.Actions() {
		if act.GetResource().Resource == "secrets" {
			reads++
			if act.GetNamespace() != "ns-07" {
				t.Errorf("lean list: %s of secrets in namespace %q, which alice may not read", act.GetVerb(), act.GetNamespace())
			}
		}
	}
	if reads != 2 {
		t.Errorf("lean list read %d records, want ns-07's 2", reads)
	}
	if a.reviews != 51 {
		t.Errorf("%d reviews, want one cluster-wide, then one per namespace (50)", a.reviews)
	}
	if n := len(s.heads.by); n != 1 {
		t.Errorf("heads cached for %d namespaces, want 1", n)
	}

	// Helm's list (no limitInfo) runs over ns-07 alone, not over every namespace.
	full, err := s.List(ctx, alice, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if len(helm.listed) != 1 || helm.listed[0] != "ns-07" || len(full.([]api.Release)) != 1 {
		t.Errorf("Helm's list ran over %q (answer %d), want [ns-07] only", helm.listed, len(full.([]api.Release)))
	}

	// A caller who may read every namespace costs one Helm list over all of them.
	all := map[string]bool{}
	for i := 0; i < 50; i++ {
		all[fmt.Sprintf("ns-%02d", i)] = true
	}
	a.may["root"] = all
	helm.listed = nil
	if _, err := s.List(ctx, &auth.User{Name: "root"}, "", false); err != nil {
		t.Fatal(err)
	}
	if len(helm.listed) != 1 || helm.listed[0] != "" {
		t.Errorf("Helm's list for a reader of every namespace ran over %q, want one list of all", helm.listed)
	}
	// Nobody readable: nothing is read.
	cl.ClearActions()
	helm.listed = nil
	for _, limit := range []bool{true, false} {
		if _, err := s.List(ctx, &auth.User{Name: "bob"}, "", limit); err != nil {
			t.Fatal(err)
		}
	}
	if len(cl.Actions()) != 0 || len(helm.listed) != 0 {
		t.Errorf("bob, who may read nothing, made %d reads and Helm lists over %q", len(cl.Actions()), helm.listed)
	}
}

// Without the metadata index an all-namespaces list cannot be narrowed: refused, not
// answered with submit's rights.
func TestAllNamespacesListNeedsIndex(t *testing.T) {
	helm := &recordingHelm{}
	s := &Service{Helm: helm, Authorizer: &authz{}}
	if _, err := s.List(context.Background(), &auth.User{Name: "alice"}, "", false); err != ErrNoIndex {
		t.Errorf("List = %v, want ErrNoIndex", err)
	}
	if len(helm.listed) != 0 {
		t.Errorf("Helm listed %q", helm.listed)
	}
}

// The namespaces of an all-namespaces list are reviewed at once, reviewsAtOnce at a time
// (one after another, 1,000 reviews outlasted the list's deadline on a busy API server),
// and a caller who may list Secrets everywhere costs one review, not one per namespace.
func TestAllNamespacesReviewsRunTogetherBounded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var idx metaIndex
	for i := 0; i < 200; i++ {
		m := &metav1.PartialObjectMetadata{}
		m.Namespace, m.Name, m.UID = fmt.Sprintf("ns-%03d", i), "sh.helm.release.v1.web.v1", types.UID(fmt.Sprint(i))
		m.Labels = map[string]string{release.LabelName: "web", release.LabelVersion: "1"}
		idx = append(idx, m)
	}
	a := &authz{may: map[string]map[string]bool{"alice": {"ns-007": true, "ns-150": true}, "root": {"": true}}, delay: 5 * time.Millisecond}
	s := &Service{Index: idx, Authorizer: a}
	sc, err := s.readScope(ctx, &auth.User{Name: "alice"}, "")
	if err != nil {
		t.Fatal(err)
	}
	if got := sc.namespaces(); len(got) != 2 || got[0] != "ns-007" || got[1] != "ns-150" || sc.every {
		t.Errorf("alice's scope %v (every %v), want ns-007 and ns-150", got, sc.every)
	}
	if a.maxSeen < 2 || a.maxSeen > reviewsAtOnce {
		t.Errorf("%d reviews in flight at most, want several and no more than %d", a.maxSeen, reviewsAtOnce)
	}
	if a.reviews != 201 {
		t.Errorf("%d reviews, want one cluster-wide and 200", a.reviews)
	}
	a.reviews = 0
	sc, err = s.readScope(ctx, &auth.User{Name: "root"}, "")
	if err != nil || len(sc.allowed) != 200 || !sc.every || a.reviews != 1 {
		t.Errorf("root: %d namespaces (every %v) after %d reviews, %v; want 200 after 1", len(sc.allowed), sc.every, a.reviews, err)
	}
}

// staticNamespaces is a cache's answer of which namespaces hold records.
type staticNamespaces []string

func (s staticNamespaces) RecordNamespaces() []string { return s }

// countingIndex records the namespaces whose metadata was listed.
type countingIndex struct {
	metaIndex
	mu     sync.Mutex
	listed []string
}

func (c *countingIndex) ReleaseMetas(ctx context.Context, ns string) ([]*metav1.PartialObjectMetadata, error) {
	c.mu.Lock()
	c.listed = append(c.listed, ns)
	c.mu.Unlock()
	return c.metaIndex.ReleaseMetas(ctx, ns)
}

// With the namespaces holding records known from a cache, the all-namespaces list of a
// caller who may read 2 of 50 lists the metadata of those 2 only, never of the whole
// cluster; a caller who may read everything still gets one list of every record.
func TestAllNamespacesListListsOnlyReadableNamespacesMetadata(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl, idx := fiftyNamespaces(t)
	var names staticNamespaces
	for i := 0; i < 50; i++ {
		names = append(names, fmt.Sprintf("ns-%02d", i))
	}
	counting := &countingIndex{metaIndex: idx}
	a := &authz{may: map[string]map[string]bool{"alice": {"ns-07": true, "ns-31": true}, "root": {"": true}}}
	s := &Service{Secrets: &release.Store{Client: cl.Typed()}, Index: counting, Namespaces: names, Authorizer: a}
	out, err := s.List(ctx, &auth.User{Name: "alice"}, "", true)
	if err != nil {
		t.Fatal(err)
	}
	infos := out.([]api.ReleaseInfo)
	if len(infos) != 4 {
		t.Errorf("alice's list %+v, want the 4 releases of ns-07 and ns-31", infos)
	}
	sort.Strings(counting.listed)
	if len(counting.listed) != 2 || counting.listed[0] != "ns-07" || counting.listed[1] != "ns-31" {
		t.Errorf("metadata listed for %q, want ns-07 and ns-31 only", counting.listed)
	}
	if a.reviews != 51 {
		t.Errorf("%d reviews, want one cluster-wide and one per namespace (50)", a.reviews)
	}
	counting.listed = nil
	out, err = s.List(ctx, &auth.User{Name: "root"}, "", true)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.([]api.ReleaseInfo)); n != 100 || len(counting.listed) != 1 || counting.listed[0] != "" {
		t.Errorf("root's list: %d releases after metadata lists of %q, want 100 after one list of every namespace", n, counting.listed)
	}
}
