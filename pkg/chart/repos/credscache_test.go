package repos

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"go.uber.org/zap"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// The credentials cache keeps at most its bound of a namespace: a tenant whose 30
// repositories name, four times over, 30 new CA ConfigMaps of 1 MiB holds no more than
// credsPerNamespace, and another namespace's value read before stays.
func TestCredentialsCacheIsBoundedPerNamespace(t *testing.T) {
	const perGen, gens = 30, 4
	kube := []runtime.Object{cm("team", "ca", KeyCABundle, "team's CA")}
	ca := strings.Repeat("x", 1<<20)
	for i := range perGen * gens {
		kube = append(kube, cm("mallory", fmt.Sprintf("ca-%d", i), KeyCABundle, ca))
	}
	objects := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	s := &Set{Client: fake.NewSimpleClientset(kube...), Log: zap.NewNop().Sugar(), creds: newCredsCache(credsPerNamespace, credsTotal),
		project: cache.NewGenericLister(objects, ProjectGVR.GroupResource())}
	ctx := context.Background()
	if err := objects.Add(repoObject("ProjectHelmChartRepository", "team", "r", "https://team.example/", false, map[string]string{"ca": "ca"})); err != nil {
		t.Fatal(err)
	}
	_ = s.Repos(ctx, "team")
	for g := range gens {
		for i := range perGen {
			if err := objects.Update(repoObject("ProjectHelmChartRepository", "mallory", fmt.Sprintf("r%d", i),
				"https://mallory.example/", false, map[string]string{"ca": fmt.Sprintf("ca-%d", g*perGen+i)})); err != nil {
				t.Fatal(err)
			}
		}
		_ = s.Repos(ctx, "mallory") // an install by chart_url, or the namespace's index
	}
	held := s.creds.bytes
	t.Logf("%d generations of %d repositories, each naming its own 1 MiB CA ConfigMap: the credentials cache holds %d MiB", gens, perGen, held>>20)
	if held > credsPerNamespace+1<<10 {
		t.Errorf("the credentials cache holds %d MiB, over %d MiB", held>>20, credsPerNamespace>>20)
	}
	if e, ok := s.creds.get("team", "configmap/ca/"+KeyCABundle); !ok || string(e.value) != "team's CA" {
		t.Errorf("team's CA was pushed out by mallory's: %q, %v", e.value, ok)
	}
}

// Past its total, the cache drops the least recently used namespaces whole.
func TestCredentialsCacheDropsTheLeastRecentlyUsedNamespace(t *testing.T) {
	c := newCredsCache(100, 350)
	for _, ns := range []string{"a", "b", "c"} {
		c.put(ns, "k", credsEntry{value: make([]byte, 99)})
	}
	if _, ok := c.get("a", "k"); !ok { // a is now the most recently used
		t.Fatal("a missing")
	}
	c.put("d", "k", credsEntry{value: make([]byte, 99)})
	for ns, kept := range map[string]bool{"a": true, "b": false, "c": true, "d": true} {
		if _, ok := c.get(ns, "k"); ok != kept {
			t.Errorf("%s kept: %v, want %v", ns, ok, kept)
		}
	}
	if held := c.bytes; held != 300 {
		t.Errorf("the cache holds %d bytes, want 300", held)
	}
}

// A namespace keeps at most credsKeysPerNamespace entries however many missing keys its
// repositories name (review9 L2: a tenantLRU kept ~16,000 here, each miss walking them all).
func TestCredentialsCacheBoundsTheEntriesOfANamespace(t *testing.T) {
	s := &Set{creds: newCredsCache(credsPerNamespace, credsTotal)}
	missing := func() ([]byte, bool, error) { return nil, false, nil }
	for i := range 4 * credsKeysPerNamespace {
		_, _ = s.cached(context.Background(), "configmap", "mallory", fmt.Sprintf("ca-%d", i), KeyCABundle, missing)
	}
	n, ok := s.creds.byNS.Get("mallory")
	if !ok {
		t.Fatal("mallory's entries missing")
	}
	if kept := n.(*nsCreds).keys.Len(); kept > credsKeysPerNamespace {
		t.Errorf("a namespace keeps %d entries, over %d", kept, credsKeysPerNamespace)
	}
}
