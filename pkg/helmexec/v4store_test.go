package helmexec

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	chart4 "helm.sh/helm/v4/pkg/chart/v2"
	releasei4 "helm.sh/helm/v4/pkg/release"
	common4 "helm.sh/helm/v4/pkg/release/common"
	release4 "helm.sh/helm/v4/pkg/release/v1"
	driver4 "helm.sh/helm/v4/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

func v4Release(name string, version int, method string, rollback int) *release4.Release {
	now := time.Date(2026, 12, 6, 4, 0, 0, 0, time.UTC)
	return &release4.Release{Name: name, Namespace: "ns", Version: version, ApplyMethod: method,
		Labels: map[string]string{"team": "a"},
		Chart:  &chart4.Chart{Metadata: &chart4.Metadata{Name: "tiny", Version: "1.0.0", APIVersion: "v2"}},
		Config: map[string]any{"v": "x"}, Manifest: "kind: ConfigMap\n",
		Info: &release4.Info{Status: common4.StatusDeployed, FirstDeployed: now, LastDeployed: now,
			Description: "Rollback to 1", RollbackRevision: rollback}}
}

// The v4 engine's storage chain (extrasSecrets under the guarded v3 driver, v4Driver on
// top) writes what Helm v4's own Secrets driver reads, apply_method and rollback revision
// included, and reads back what Helm v4's driver wrote.
func TestV4RecordsAreHelmV4sRecords(t *testing.T) {
	cs := fake.NewClientset()
	si := cs.CoreV1().Secrets("ns")
	extras := &extrasByKey{}
	ours := &v4Driver{d: release.GuardedSecrets(extrasSecrets(si, extras)), extras: extras}
	theirs := driver4.NewSecrets(si)

	key := storage.Key("web", 2)
	if err := ours.Create(key, v4Release("web", 2, "ssa", 1)); err != nil {
		t.Fatal(err)
	}
	got, err := theirs.Get(key)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := asV4(got)
	if r.ApplyMethod != "ssa" || r.Info.RollbackRevision != 1 || r.Config["v"] != "x" || r.Info.Description != "Rollback to 1" {
		t.Errorf("helm v4 reads apply_method %q, rollback %d, config %v, description %q", r.ApplyMethod, r.Info.RollbackRevision, r.Config, r.Info.Description)
	}

	key3 := storage.Key("web", 3)
	if err := theirs.Create(key3, v4Release("web", 3, "csa", 2)); err != nil {
		t.Fatal(err)
	}
	fresh := &extrasByKey{} // another action: nothing known but what it reads
	reader := &v4Driver{d: release.GuardedSecrets(extrasSecrets(si, fresh)), extras: fresh}
	for _, read := range []func() (*release4.Release, error){
		func() (*release4.Release, error) { g, err := reader.Get(key3); return asV4OrErr(g, err) },
		func() (*release4.Release, error) {
			l, err := reader.Query(map[string]string{"name": "web", "version": "3"})
			if err != nil || len(l) != 1 {
				return nil, errors.Join(err, errors.New("not one record"))
			}
			return asV4(l[0])
		},
	} {
		r, err := read()
		if err != nil {
			t.Fatal(err)
		}
		if r.ApplyMethod != "csa" || r.Info.RollbackRevision != 2 || r.Labels["team"] != "a" {
			t.Errorf("read back apply_method %q, rollback %d, labels %v", r.ApplyMethod, r.Info.RollbackRevision, r.Labels)
		}
	}
	sec, err := si.Get(context.Background(), key, metav1.GetOptions{})
	if err != nil || sec.Labels["owner"] != "helm" || sec.Labels["status"] != "deployed" {
		t.Errorf("labels %v (%v)", sec.Labels, err)
	}
}

func asV4OrErr(r any, err error) (*release4.Release, error) {
	if err != nil {
		return nil, err
	}
	return asV4(r)
}

// Helm v4's storage tells "not found" by its own error value.
func TestV4DriverErrorsAreHelmV4s(t *testing.T) {
	mem := storage.NewMemory()
	d := &v4Driver{d: mem, extras: &extrasByKey{}}
	if _, err := d.Get(storage.Key("web", 1)); !errors.Is(err, driver4.ErrReleaseNotFound) {
		t.Errorf("get of nothing: %v", err)
	}
	if err := d.Create(storage.Key("web", 1), v4Release("web", 1, "csa", 0)); err != nil {
		t.Fatal(err)
	}
	if err := d.Create(storage.Key("web", 1), v4Release("web", 1, "csa", 0)); !errors.Is(err, driver4.ErrReleaseExists) {
		t.Errorf("second create: %v", err)
	}
	l, err := d.List(func(releasei4.Releaser) bool { return true })
	if err != nil || len(l) != 1 {
		t.Fatalf("list: %d, %v", len(l), err)
	}
	if r, _ := asV4(l[0]); r.ApplyMethod != "csa" {
		t.Errorf("apply method through the memory driver: %q", r.ApplyMethod)
	}
}

// A chart converts with its subcharts (a stored record's never has any).
func TestChartV4KeepsSubcharts(t *testing.T) {
	parent := tiny("1.0.0")
	sub := tiny("0.1.0")
	sub.Metadata.Name = "sub"
	parent.AddDependency(sub)
	parent.Metadata.Dependencies = []*chart.Dependency{{Name: "sub", Version: "0.1.0"}}
	parent.Schema = []byte(`{"type":"object"}`)
	c, err := chartV4(parent)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Dependencies()) != 1 || c.Dependencies()[0].Name() != "sub" || c.Dependencies()[0].Parent() != c {
		t.Fatalf("subcharts %v", c.Dependencies())
	}
	if len(c.Metadata.Dependencies) != 1 || string(c.Schema) != `{"type":"object"}` || len(c.Templates) != 1 || c.Values["v"] != "default" {
		t.Errorf("converted chart %+v", c)
	}
}

func TestApplyConflictNamesTheManager(t *testing.T) {
	cases := []struct {
		err  error
		want string
	}{
		{errors.New(`failed to create resource: Apply failed with 1 conflict: conflict with "kubectl-edit" using apps/v1: .spec.replicas`),
			`server-side apply conflict: the fields are managed by "kubectl-edit" (force_conflicts: true takes them over)`},
		{errors.New(`Apply failed with 2 conflicts: conflicts with "flux" using v1: .data.a
conflicts with "flux" using v1: .data.b`), `managed by "flux" (`},
		{errors.New("other"), "other"},
	}
	for _, c := range cases {
		got := applyConflict(c.err)
		if strings.Contains(got.Error(), c.want) {
			continue
		}
		t.Errorf("%v -> %v, want %q", c.err, got, c.want)
	}
	if !errors.Is(applyConflict(cases[0].err), ErrApplyConflict) || errors.Is(applyConflict(cases[2].err), ErrApplyConflict) {
		t.Error("ErrApplyConflict")
	}
}
