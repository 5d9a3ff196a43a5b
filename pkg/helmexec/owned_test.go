package helmexec

import (
	"errors"
	"io"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/kube"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	kube4 "helm.sh/helm/v4/pkg/kube"
	kubefake4 "helm.sh/helm/v4/pkg/kube/fake"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"sigs.k8s.io/yaml"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

func TestJudgeOwnership(t *testing.T) {
	w := owner{name: "web", namespace: "ns"}
	own := map[string]string{annoReleaseName: "web", annoReleaseNamespace: "ns"}
	for _, tc := range []struct {
		name  string
		annos map[string]string
		err   error
		want  verdict
	}{
		{"owned", own, nil, deleteIt},
		{"no annotations", nil, nil, keep},
		{"another release", map[string]string{annoReleaseName: "db", annoReleaseNamespace: "ns"}, nil, keep},
		{"same name, another namespace", map[string]string{annoReleaseName: "web", annoReleaseNamespace: "victim"}, nil, keep},
		{"name only", map[string]string{annoReleaseName: "web"}, nil, keep},
		{"not found", nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "x"), gone},
		{"forbidden", nil, apierrors.NewForbidden(schema.GroupResource{Resource: "clusterroles"}, "x", errors.New("no")), keep},
	} {
		if got, why := w.judge(tc.annos, tc.err); got != tc.want || (got == keep) != (why != "") {
			t.Errorf("%s: %v %q, want %v", tc.name, got, why, tc.want)
		}
	}
}

// hostileManifest is a record a tenant rewrote: its own objects, a ClusterRole and a
// Deployment of kube-system it may not edit, and one already gone.
const hostileManifest = `---
# Source: tiny/templates/cm.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: web
  namespace: ns
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: old
  namespace: ns
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: victim
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: gone
  namespace: ns
` + smuggledHooks

// smuggledHooks hide the hook annotation from Helm's sorter (annotationſ folds onto
// annotations there, and its null comes last) while the built objects carry it.
const smuggledHooks = `---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: hidden
  annotations:
    helm.sh/hook: pre-install
  annotationſ: null
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: leftover
  annotations:
    helm.sh/hook: pre-install
  annotationſ: null
`

// liveObjects is the cluster the test's kube clients see: web and old owned by ns/web,
// the ClusterRoles victim and hidden unannotated, leftover a hook another action left,
// coredns owned by another release, gone absent.
func liveObjects(info *resource.Info) (runtime.Object, error) {
	owned := map[string]string{annoReleaseName: "web", annoReleaseNamespace: "ns"}
	annos := map[string]map[string]string{
		"ConfigMap/web": owned, "ConfigMap/old": owned, "ClusterRole/victim": nil, "ClusterRole/hidden": nil,
		"ClusterRole/leftover": {helmrelease.HookAnnotation: "pre-install"},
		"Deployment/coredns":   {annoReleaseName: "dns", annoReleaseNamespace: "kube-system"},
	}
	a, ok := annos[info.Mapping.GroupVersionKind.Kind+"/"+info.Name]
	if !ok {
		return nil, apierrors.NewNotFound(info.Mapping.Resource.GroupResource(), info.Name)
	}
	u := &unstructured.Unstructured{}
	u.SetAnnotations(a)
	u.SetNamespace(info.Namespace)
	return u, nil
}

// buildInfos parses a manifest as Helm's Build does, without a cluster.
func buildInfos(t *testing.T, r io.Reader) []*resource.Info {
	b, _ := io.ReadAll(r)
	var out []*resource.Info
	for _, doc := range strings.Split(string(b), "\n---") {
		var obj map[string]any
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Error(err)
			continue
		}
		if len(obj) == 0 {
			continue
		}
		u := &unstructured.Unstructured{Object: obj}
		gvk := u.GroupVersionKind()
		if u.GetNamespace() == "" && gvk.Kind != "ClusterRole" { // Build's default namespace
			u.SetNamespace("ns")
		}
		out = append(out, &resource.Info{Name: u.GetName(), Namespace: u.GetNamespace(), Object: u,
			Mapping: &meta.RESTMapping{GroupVersionKind: gvk, Resource: gvk.GroupVersion().WithResource(strings.ToLower(gvk.Kind) + "s")}})
	}
	return out
}

// deletions records what the kube client underneath was asked to delete: an update's
// original minus its target, and deletes.
type deletions struct {
	mu   sync.Mutex
	seen []string
	t    *testing.T
}

func (d *deletions) add(infos []*resource.Info) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, i := range infos {
		d.seen = append(d.seen, i.Mapping.GroupVersionKind.Kind+"/"+i.Name)
	}
}

func (d *deletions) got() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	sort.Strings(d.seen)
	return strings.Join(d.seen, " ")
}

type deletingKube struct {
	kubefake.PrintingKubeClient
	d *deletions
}

func (k *deletingKube) Build(r io.Reader, _ bool) (kube.ResourceList, error) {
	return buildInfos(k.d.t, r), nil
}
func (k *deletingKube) Update(original, target kube.ResourceList, force bool) (*kube.Result, error) {
	k.d.add(original.Difference(target))
	return k.PrintingKubeClient.Update(original, target, force)
}
func (k *deletingKube) Delete(r kube.ResourceList) (*kube.Result, []error) {
	k.d.add(r)
	return &kube.Result{Deleted: r}, nil
}

func (k *deletingKube) DeleteWithPropagationPolicy(r kube.ResourceList, _ metav1.DeletionPropagation) (*kube.Result, []error) {
	return k.Delete(r)
}

type deletingKube4 struct {
	kubefake4.PrintingKubeClient
	d *deletions
}

func (k *deletingKube4) Build(r io.Reader, _ bool) (kube4.ResourceList, error) {
	return buildInfos(k.d.t, r), nil
}
func (k *deletingKube4) Update(original, target kube4.ResourceList, o ...kube4.ClientUpdateOption) (*kube4.Result, error) {
	k.d.add(original.Difference(target))
	return k.PrintingKubeClient.Update(original, target, o...)
}
func (k *deletingKube4) Delete(r kube4.ResourceList, _ metav1.DeletionPropagation) (*kube4.Result, []error) {
	k.d.add(r)
	return &kube4.Result{Deleted: r}, nil
}

// putRecord stores revision rev of ns/web as a tenant could have written it.
func putRecord(t *testing.T, mem *storage.Memory, rev int, status helmrelease.Status, manifest string) {
	t.Helper()
	now := helmtime.Now()
	rel := &helmrelease.Release{Name: "web", Namespace: "ns", Version: rev, Chart: tiny("1.0.0"), Manifest: manifest,
		Config: map[string]any{}, Info: &helmrelease.Info{Status: status, FirstDeployed: now, LastDeployed: now}}
	if err := mem.Create(release.SecretName("web", rev), rel); err != nil {
		t.Fatal(err)
	}
}

// An upgrade, a rollback and an uninstall of a release whose current record a tenant
// rewrote delete only the objects that are live and owned by the release, on both engines.
func TestDeletesOnlyWhatTheReleaseOwns(t *testing.T) {
	const want = "ConfigMap/old"
	owned := want + " ConfigMap/web"
	for _, engine := range []string{"v3", "v4"} {
		run := func(name string, act func(*Factory, *storage.Memory, []Option) error, wantDeleted string) {
			t.Run(engine+"/"+name, func(t *testing.T) {
				d := &deletions{t: t}
				var f *Factory
				var mem *storage.Memory
				var opts []Option
				if engine == "v3" {
					f, mem, opts = offline(t)
					opts = append(opts, WithKubeClient(&deletingKube{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}, d: d}))
				} else {
					f, mem, opts = offlineV4(t)
					opts = append(opts, WithV4KubeClient(&deletingKube4{PrintingKubeClient: kubefake4.PrintingKubeClient{Out: io.Discard}, d: d}))
				}
				opts = append(opts, func(o *configOptions) { o.live = liveObjects })
				if err := act(f, mem, opts); err != nil {
					t.Fatal(err)
				}
				if got := d.got(); got != wantDeleted {
					t.Errorf("deleted %q, want %q", got, wantDeleted)
				}
			})
		}
		run("upgrade", func(f *Factory, mem *storage.Memory, opts []Option) error {
			putRecord(t, mem, 1, helmrelease.StatusDeployed, hostileManifest)
			reserve(t, mem, "web", 2, helmrelease.StatusPendingUpgrade)
			_, err := f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2, Chart: tiny("1.0.0")}, opts...)
			return err
		}, want)
		run("rollback", func(f *Factory, mem *storage.Memory, opts []Option) error {
			putRecord(t, mem, 1, helmrelease.StatusSuperseded, "---\n# Source: tiny/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: ns\n")
			putRecord(t, mem, 2, helmrelease.StatusDeployed, hostileManifest)
			reserve(t, mem, "web", 3, helmrelease.StatusPendingRollback)
			_, err := f.Rollback(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 3, RollbackTo: 1, RollbackPin: pinOf(t, mem, 1)}, opts...)
			return err
		}, want)
		run("uninstall", func(f *Factory, mem *storage.Memory, opts []Option) error {
			putRecord(t, mem, 1, helmrelease.StatusUninstalling, hostileManifest)
			_, err := f.Uninstall(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Timeout: time.Minute}, opts...)
			return err
		}, owned)
	}
}

// A delete passes an object the release does not own only if its live copy is a hook;
// an uninstall's (hooks from the record) only in the release's namespace or if it created it.
func TestHooksAreJudgedLive(t *testing.T) {
	hook := map[string]string{helmrelease.HookAnnotation: "pre-delete"}
	for _, tc := range []struct {
		name              string
		namespace         string
		manifest, live    map[string]string
		recordHooks, made bool
		want              bool
	}{
		{"manifest says hook, live copy not", "", hook, nil, false, false, false},
		{"manifest says hook, live copy not, uninstall", "ns", hook, nil, true, false, false},
		{"live hook, cluster-scoped, chart's hooks", "", nil, hook, false, false, true},
		{"live hook, cluster-scoped, record's hooks", "", hook, hook, true, false, false},
		{"live hook, cluster-scoped, created by this uninstall", "", hook, hook, true, true, true},
		{"live hook, another namespace, record's hooks", "victim", hook, hook, true, false, false},
		{"live hook, the release's namespace, record's hooks", "ns", hook, hook, true, false, true},
	} {
		w := owner{name: "web", namespace: "ns", recordHooks: tc.recordHooks, created: &createdObjects{}}
		gvk := schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"}
		manifest := &unstructured.Unstructured{}
		manifest.SetAnnotations(tc.manifest)
		info := &resource.Info{Name: "x", Namespace: tc.namespace, Object: manifest, Mapping: &meta.RESTMapping{GroupVersionKind: gvk}}
		if tc.made {
			w.created.add([]*resource.Info{info})
		}
		get := func(*resource.Info) (runtime.Object, error) {
			u := &unstructured.Unstructured{}
			u.SetAnnotations(tc.live)
			u.SetNamespace(tc.namespace)
			return u, nil
		}
		var kept []string
		got := w.ownedOf([]*resource.Info{info}, true, get, func(f string, a ...any) { kept = append(kept, f) })
		if (len(got) == 1) != tc.want || (len(kept) == 1) == tc.want {
			t.Errorf("%s: deleted %v (kept %d), want %v", tc.name, len(got) == 1, len(kept), tc.want)
		}
		if got := w.ownedOf([]*resource.Info{info}, false, get, func(string, ...any) {}); len(got) != 0 {
			t.Errorf("%s: an update deletes an unowned hook", tc.name)
		}
	}
}
