package reader

import (
	"context"
	"encoding/json"
	"io"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmstorage "helm.sh/helm/v3/pkg/storage"
	helmtime "helm.sh/helm/v3/pkg/time"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

func rel(ns, name string, version int, status helmrelease.Status) *helmrelease.Release {
	now := helmtime.Now()
	return &helmrelease.Release{Name: name, Namespace: ns, Version: version, Manifest: "kind: ConfigMap\n",
		Config: map[string]any{"a": 1},
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "0.1.0", AppVersion: "1.0", APIVersion: "v2"},
			Templates: []*chart.File{{Name: "templates/all.yaml", Data: []byte("kind: ConfigMap")}}},
		Info: &helmrelease.Info{FirstDeployed: now, LastDeployed: now, Status: status, Description: string(status) + " " + name}}
}

// The lean list must answer what Helm's list, trimmed by api.Limit, answers: the latest
// revision of every release in every status, sorted by name.
func TestLimitedListAnswersAsHelmsList(t *testing.T) {
	testLimitedList(t, false)
}

// With the metadata index, a list reads from the API server only the records that changed.
func TestLimitedListWithIndexReadsOnlyChangedRecords(t *testing.T) {
	testLimitedList(t, true)
}

// fakeIndex answers from the fake cluster's secrets, as a metadata-only list would.
type fakeIndex struct{ cl kubernetes.Interface }

func (f fakeIndex) ReleaseMetas(ctx context.Context, ns string) ([]*metav1.PartialObjectMetadata, error) {
	list, err := f.cl.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	var out []*metav1.PartialObjectMetadata
	for i := range list.Items {
		out = append(out, &metav1.PartialObjectMetadata{ObjectMeta: list.Items[i].ObjectMeta})
	}
	return out, nil
}

// gets counts the GETs and LISTs of secrets the fake cluster served since the last call.
func gets(cl *fakekube.Cluster) (get, list int) {
	for _, a := range cl.Actions() {
		switch {
		case a.Matches("get", "secrets"):
			get++
		case a.Matches("list", "secrets"):
			list++
		}
	}
	cl.ClearActions()
	return get, list
}

func testLimitedList(t *testing.T, withIndex bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cl := fakekube.New(fakekube.NewClock(time.Now()))
	d := storage.NewSecrets(cl.Typed().CoreV1().Secrets("ns"))
	for _, r := range []*helmrelease.Release{
		rel("ns", "web", 1, helmrelease.StatusSuperseded), rel("ns", "web", 2, helmrelease.StatusDeployed),
		rel("ns", "web", 3, helmrelease.StatusPendingUpgrade), rel("ns", "db", 1, helmrelease.StatusFailed),
		rel("ns", "api", 1, helmrelease.StatusUninstalled), rel("ns", "cache", 10, helmrelease.StatusDeployed),
		rel("ns", "cache", 9, helmrelease.StatusSuperseded),
	} {
		if err := d.Create(release.SecretName(r.Name, r.Version), r); err != nil {
			t.Fatal(err)
		}
	}
	store := &release.Store{Client: cl.Typed()}
	s := &Service{Secrets: store}
	if withIndex {
		s.Index = fakeIndex{cl.Typed()}
	}
	want := helmList(t, d)
	cl.ClearActions()
	got, err := s.List(ctx, nil, "ns", true)
	if err != nil {
		t.Fatal(err)
	}
	if g, w := asJSON(t, got), asJSON(t, want); g != w {
		t.Fatalf("lean list:\n%s\nHelm's list:\n%s", g, w)
	}

	if g, l := gets(cl); withIndex && (g != 4 || l != 1) { // the metadata list is the one list
		t.Errorf("first list: %d GETs and %d LISTs of secrets, want 4 (the latest revisions) and 1", g, l)
	}
	// A rewritten record is decoded again (its resourceVersion changed); the others come
	// from the cache and still answer the same.
	up := rel("ns", "web", 3, helmrelease.StatusDeployed)
	if err := d.Update(release.SecretName("web", 3), up); err != nil {
		t.Fatal(err)
	}
	cl.ClearActions()
	got, err = s.List(ctx, nil, "ns", true)
	if err != nil {
		t.Fatal(err)
	}
	if g, l := gets(cl); withIndex && (g != 1 || l != 1) {
		t.Errorf("list after one rewrite: %d GETs and %d LISTs of secrets, want 1 (the rewritten record) and 1", g, l)
	}
	if g, w := asJSON(t, got), asJSON(t, helmList(t, d)); g != w {
		t.Fatalf("after a rewrite, lean list:\n%s\nHelm's list:\n%s", g, w)
	}
	if n := len(s.heads.by["ns"]); n != 4 {
		t.Errorf("cache holds %d heads, want the 4 latest revisions", n)
	}
}

func helmList(t *testing.T, d storage.Driver) []api.ReleaseInfo {
	t.Helper()
	l := action.NewList(&action.Configuration{Releases: helmstorage.Init(d), KubeClient: &kubefake.PrintingKubeClient{Out: io.Discard},
		Log: func(string, ...any) {}})
	l.All = true
	l.SetStateMask()
	rels, err := l.Run()
	if err != nil {
		t.Fatal(err)
	}
	out := []api.ReleaseInfo{}
	for _, r := range rels {
		out = append(out, api.Limit(r))
	}
	return out
}

func asJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.MarshalIndent(v, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
