package submitter

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// renderer is a DiffRenderer answering manifest (or err), recording its jobs and slots.
type renderer struct {
	manifest string
	err      error
	slotErr  error
	jobs     []helmexec.ChartRender
	slots    int
	held     int
}

func (r *renderer) Slot(ctx context.Context, _ *auth.User, _ string) (context.Context, func(), error) {
	if r.slotErr != nil {
		return nil, nil, r.slotErr
	}
	r.slots++
	r.held++
	return ctx, func() { r.held-- }, nil
}

func (r *renderer) Render(_ context.Context, job helmexec.ChartRender) (string, error) {
	if r.held == 0 {
		return "", errors.New("rendered without a slot")
	}
	r.jobs = append(r.jobs, job)
	return r.manifest, r.err
}

const diffBefore = `---
# Source: tiny/templates/cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: web
data:
  message: hello
---
# Source: tiny/templates/job.yaml
apiVersion: batch/v1
kind: Job
metadata:
  name: old
`

const diffAfter = `---
# Source: crds/crd.yaml
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.example.com
---
# Source: tiny/templates/cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: web
data:
  message: changed
---
# Source: tiny/templates/svc.yaml
apiVersion: v1
kind: Service
metadata:
  name: new
`

// diffEnv is newEnv with a deployed revision 1 of "web" (manifest diffBefore), a renderer
// answering diffAfter and an authorizer allowing alice what a diff needs in "ns".
func diffEnv(t *testing.T) (*env, *renderer, *authz) {
	e := newEnv(t)
	r := &renderer{manifest: diffAfter}
	az := &authz{allow: map[auth.Need]bool{
		{Verb: "list", Resource: "secrets", Namespace: "ns"}:   true,
		{Verb: "create", Resource: "secrets", Namespace: "ns"}: true,
		{Verb: "update", Resource: "secrets", Namespace: "ns"}: true,
	}}
	e.svc.Render, e.svc.Authorizer = r, az
	e.deployManifest("web", 1, diffBefore)
	return e, r, az
}

func (e *env) deployManifest(name string, v int, manifest string) {
	e.t.Helper()
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "1.0.0", APIVersion: "v2"},
		Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte("kind: ConfigMap")}}}
	rel := &helmrelease.Release{Name: name, Namespace: "ns", Version: v, Chart: ch, Config: map[string]any{"replicas": 1},
		Manifest: manifest, Info: &helmrelease.Info{Status: helmrelease.StatusDeployed}}
	if err := storage.NewSecrets(e.c.CoreV1().Secrets("ns")).Create(release.SecretName(name, v), rel); err != nil {
		e.t.Fatal(err)
	}
}

func upgradeDiff(name string) api.DiffRequest {
	return api.DiffRequest{ReleaseRequest: api.ReleaseRequest{Name: name, Namespace: "ns", ChartURL: "https://charts.example/tiny.tgz"}}
}

// An upgrade's diff shows what it adds, changes and removes, the chart's CRDs left out,
// rendered in a slot with the last values (none given); nothing is reserved or sent.
func TestDiffOfAnUpgrade(t *testing.T) {
	e, r, _ := diffEnv(t)
	out, err := e.svc.Diff(ctx(t), upgradeDiff("web"), alice)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range out.Changes {
		got = append(got, c.Change+" "+c.Key())
	}
	want := "ADD ns, new, Service (v1)|REMOVE ns, old, Job (batch)|MODIFY ns, web, ConfigMap (v1)"
	if strings.Join(got, "|") != want {
		t.Errorf("changes %v, want %s", got, want)
	}
	if out.From != 1 || out.To != 2 || out.Action != "upgrade" {
		t.Errorf("diff %+v", out)
	}
	if len(r.jobs) != 1 || fmt.Sprint(r.jobs[0].Values["replicas"]) != "1" || r.held != 0 || r.slots != 1 {
		t.Errorf("jobs %+v, slots %d, held %d", r.jobs, r.slots, r.held)
	}
	if len(r.jobs) == 1 && (r.jobs[0].Revision != 2 || !r.jobs[0].Upgrade) {
		t.Errorf("rendered revision %d, upgrade %t; want what the upgrade renders: revision 2, an upgrade", r.jobs[0].Revision, r.jobs[0].Upgrade)
	}
	if len(e.secrets()) != 1 || len(e.sender.sent) != 0 {
		t.Errorf("a diff wrote: %d records, %d events", len(e.secrets()), len(e.sender.sent))
	}
}

// A rollback and an upgrade never run test hooks: a stored one is not shown removed.
func TestDiffLeavesOutTestHooks(t *testing.T) {
	e, _, _ := diffEnv(t)
	rel, err := e.svc.Store.Get(ctx(t), "ns", "web", 1)
	if err != nil {
		t.Fatal(err)
	}
	rel.Version = 2
	rel.Hooks = []*helmrelease.Hook{
		{Name: "smoke", Kind: "Pod", Path: "tiny/templates/test.yaml", Events: []helmrelease.HookEvent{helmrelease.HookTest},
			Manifest: "apiVersion: v1\nkind: Pod\nmetadata:\n  name: smoke\n  annotations:\n    helm.sh/hook: test\n"},
		{Name: "migrate", Kind: "Job", Path: "tiny/templates/hook.yaml", Events: []helmrelease.HookEvent{helmrelease.HookPreUpgrade},
			Manifest: "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  annotations:\n    helm.sh/hook: pre-upgrade\n"},
	}
	if err := storage.NewSecrets(e.c.CoreV1().Secrets("ns")).Create(release.SecretName("web", 2), rel); err != nil {
		t.Fatal(err)
	}
	out, err := e.svc.Diff(ctx(t), upgradeDiff("web"), alice)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range out.Changes {
		got = append(got, c.Change+" "+c.Key())
	}
	want := "REMOVE ns, migrate, Job (batch)|ADD ns, new, Service (v1)|REMOVE ns, old, Job (batch)|MODIFY ns, web, ConfigMap (v1)"
	if strings.Join(got, "|") != want {
		t.Errorf("changes %v, want %s", got, want)
	}
}

// With include_crds the chart's CRDs show as added, as helm-diff's --include-crds shows them.
func TestDiffIncludesCRDsWhenAsked(t *testing.T) {
	e, _, _ := diffEnv(t)
	req := upgradeDiff("web")
	req.IncludeCRDs = true
	out, err := e.svc.Diff(ctx(t), req, alice)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range out.Changes {
		got = append(got, c.Change+" "+c.Key())
	}
	want := "ADD ns, new, Service (v1)|REMOVE ns, old, Job (batch)|ADD ns, things.example.com, CustomResourceDefinition (apiextensions.k8s.io)|MODIFY ns, web, ConfigMap (v1)"
	if strings.Join(got, "|") != want {
		t.Errorf("changes %v, want %s", got, want)
	}
}

// A rollback's diff compares with the target's stored manifest, without a render.
func TestDiffOfARollback(t *testing.T) {
	e, r, _ := diffEnv(t)
	e.deployManifest("web", 2, strings.Replace(diffBefore, "hello", "two", 1))
	out, err := e.svc.Diff(ctx(t), api.DiffRequest{Action: "rollback", ReleaseRequest: api.ReleaseRequest{Name: "web", Namespace: "ns"}}, alice)
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Changes) != 1 || out.Changes[0].Name != "web" || !strings.Contains(out.Changes[0].Diff, "+  message: hello") || len(r.jobs) != 0 {
		t.Errorf("changes %+v, renders %d", out.Changes, len(r.jobs))
	}
}

func TestDiffRefusals(t *testing.T) {
	busy := errors.New("no render slot")
	for _, tc := range []struct {
		name   string
		req    api.DiffRequest
		change func(*env, *renderer, *authz)
		want   error
	}{
		{"bad name", api.DiffRequest{ReleaseRequest: api.ReleaseRequest{Name: "Bad_Name", Namespace: "ns"}}, nil, ErrInvalid},
		{"bad action", api.DiffRequest{Action: "delete", ReleaseRequest: upgradeDiff("web").ReleaseRequest}, nil, ErrInvalid},
		{"may not read the releases", upgradeDiff("web"), func(_ *env, _ *renderer, az *authz) {
			delete(az.allow, auth.Need{Verb: "list", Resource: "secrets", Namespace: "ns"})
		}, auth.ErrForbidden},
		{"may not upgrade", upgradeDiff("web"), func(_ *env, _ *renderer, az *authz) {
			delete(az.allow, auth.Need{Verb: "update", Resource: "secrets", Namespace: "ns"})
		}, auth.ErrForbidden},
		{"no namespace", api.DiffRequest{ReleaseRequest: api.ReleaseRequest{Name: "web", Namespace: "gone", ChartURL: "https://charts.example/tiny.tgz"}},
			func(_ *env, _ *renderer, az *authz) {
				for _, v := range []string{"list", "create", "update"} {
					az.allow[auth.Need{Verb: v, Resource: "secrets", Namespace: "gone"}] = true
				}
			}, ErrNamespaceNotFound},
		{"upgrade of no release", upgradeDiff("ghost"), nil, release.ErrNotFound},
		{"install of a name in use", api.DiffRequest{Action: "install", ReleaseRequest: upgradeDiff("web").ReleaseRequest}, nil, release.ErrNameInUse},
		{"rollback to no revision", api.DiffRequest{Action: "rollback", Version: 7, ReleaseRequest: api.ReleaseRequest{Name: "web", Namespace: "ns"}}, nil, ErrRevisionNotFound},
		{"chart not found", api.DiffRequest{ReleaseRequest: api.ReleaseRequest{Name: "web", Namespace: "ns", ChartURL: "https://charts.example/nope.tgz"}}, nil, chartsource.ErrNotFound},
		{"values against the schema", api.DiffRequest{ReleaseRequest: api.ReleaseRequest{Name: "web", Namespace: "ns", ChartURL: "https://charts.example/tiny.tgz",
			Values: map[string]any{"replicas": "many"}}}, nil, ErrValues},
		{"render fails", upgradeDiff("web"), func(_ *env, r *renderer, _ *authz) { r.err = ErrRender }, ErrRender},
		{"rendered manifest does not parse", upgradeDiff("web"), func(_ *env, r *renderer, _ *authz) { r.manifest = "kind: [\n" }, ErrRender},
		{"no render slot", upgradeDiff("web"), func(_ *env, r *renderer, _ *authz) { r.slotErr = busy }, busy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, r, az := diffEnv(t)
			if tc.change != nil {
				tc.change(e, r, az)
			}
			_, err := e.svc.Diff(ctx(t), tc.req, alice)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Diff: %v, want %v", err, tc.want)
			}
			if r.held != 0 || len(e.secrets()) != 1 || len(e.sender.sent) != 0 {
				t.Errorf("refused, yet %d slots held, %d records, %d events", r.held, len(e.secrets()), len(e.sender.sent))
			}
		})
	}
}

func TestWithoutCRDs(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"---\n# Source: crds/a.yaml\nkind: A\n---\nkind: B\n---\n# Source: tiny/templates/x.yaml\nkind: X\n", "---\n# Source: tiny/templates/x.yaml\nkind: X\n"},
		{"---\n# Source: tiny/templates/x.yaml\nkind: X\n", "---\n# Source: tiny/templates/x.yaml\nkind: X\n"},
		{"---\n# Source: crds/a.yaml\nkind: A\n", ""},
		{"kind: X\n", "kind: X\n"},
	} {
		if got := withoutCRDs(tc.in); got != tc.want {
			t.Errorf("withoutCRDs(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A chart-less upgrade renders the release's stored chart: packaged with its values (and
// its subcharts'), which Helm's record keeps outside the files chartutil.Save writes.
func TestStoredChartIsPackagedWithItsValues(t *testing.T) {
	e, _, _ := diffEnv(t)
	sub := &chart.Chart{Metadata: &chart.Metadata{Name: "sub", Version: "1.0.0", APIVersion: "v2"}, Values: map[string]any{"port": 80}}
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "1.0.0", APIVersion: "v2"}, Values: map[string]any{"message": "hello"},
		Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte("kind: ConfigMap")}}}
	ch.SetDependencies(sub)
	archive, err := e.svc.archiveOf(ctx(t), api.ReleaseRequest{Name: "web", Namespace: "ns"}, chartref.Ref{}, ch)
	if err != nil {
		t.Fatal(err)
	}
	loaded, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		t.Fatal(err)
	}
	if loaded.Values["message"] != "hello" || len(loaded.Dependencies()) != 1 || fmt.Sprint(loaded.Dependencies()[0].Values["port"]) != "80" {
		t.Errorf("packaged values %v, subcharts %d", loaded.Values, len(loaded.Dependencies()))
	}
	if ch.Raw != nil || sub.Parent() != ch {
		t.Errorf("the stored chart was changed")
	}
}

// A stored chart listing a null template is refused as malformed, not packaged (Save
// dereferences every template).
func TestDiffRefusesANullTemplate(t *testing.T) {
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "web", Version: "0.1.0", APIVersion: "v2"}, Templates: []*chart.File{nil}}
	_, err := (&Service{}).archiveOf(t.Context(), api.ReleaseRequest{}, chartref.Ref{}, ch)
	if !errors.Is(err, ErrRender) || !strings.Contains(err.Error(), "malformed") {
		t.Fatalf("err %v", err)
	}
}

// The records are read and decoded in the tenant's render slot, not before: a caller with
// no slot gets its 429 before any record of the release is read.
func TestDiffReadsRecordsOnlyInASlot(t *testing.T) {
	e, r, _ := diffEnv(t)
	r.slotErr = errors.New("no render slot")
	e.c.ClearActions()
	if _, err := e.svc.Diff(ctx(t), upgradeDiff("web"), alice); !errors.Is(err, r.slotErr) {
		t.Fatalf("Diff: %v", err)
	}
	for _, a := range e.c.Actions() {
		if a.GetResource().Resource == "secrets" {
			t.Errorf("read %s %s before a render slot", a.GetVerb(), a.GetResource().Resource)
		}
	}
}
