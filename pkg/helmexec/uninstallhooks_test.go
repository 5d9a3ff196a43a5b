package helmexec

import (
	"context"
	"errors"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/kube"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
	"github.com/async-helm/async-helm/pkg/signing"
)

var hooksKey = signing.Key("0123456789abcdef0123456789abcdef")

func TestDecideDeleteHooks(t *testing.T) {
	who := func(id release.Identity) string { return release.IdentityDigest(hooksKey, id) }
	alice := &release.Deployer{Who: who(release.Identity{User: "alice", Groups: []string{"b", "a"}}), Hooks: "sha256:1"}
	asAlice := who(release.Identity{User: "alice", Groups: []string{"a", "b"}})
	asAdmin := who(release.Identity{User: "admin"})
	aliceScoped := who(release.Identity{User: "alice", Groups: []string{"a", "b"}, Extra: map[string][]string{"scopes": {"user:info"}}})
	for _, tc := range []struct {
		name string
		e    hookEvidence
		want hookRun
		why  string
	}{
		{"no delete hooks", hookEvidence{caller: asAdmin}, hooksNone, ""},
		{"no delete hooks, no_hooks", hookEvidence{disabled: true}, hooksNone, ""},
		{"no_hooks", hookEvidence{disabled: true, deleteHooks: 1, sealed: alice, digest: "sha256:1", caller: asAlice}, hooksSkipped, "asked for none"},
		{"no seal", hookEvidence{deleteHooks: 1, sealErr: release.ErrDeployerSeal, digest: "sha256:1", caller: asAdmin}, hooksSkipped, "did not write them"},
		{"hooks rewritten", hookEvidence{deleteHooks: 2, sealed: alice, digest: "sha256:2", caller: asAdmin}, hooksSkipped, "changed after"},
		{"hooks rewritten, uninstalled by their writer", hookEvidence{deleteHooks: 1, sealed: alice, digest: "sha256:2", caller: asAlice}, hooksSkipped, "changed after"},
		{"sealed, the writer uninstalls", hookEvidence{deleteHooks: 1, sealed: alice, digest: "sha256:1", caller: asAlice}, hooksAsCaller, ""},
		{"sealed, another uninstalls", hookEvidence{deleteHooks: 1, sealed: alice, digest: "sha256:1", caller: asAdmin}, hooksSkipped, "only when it uninstalls"},
		{"sealed, the writer with other scopes", hookEvidence{deleteHooks: 1, sealed: alice, digest: "sha256:1", caller: aliceScoped}, hooksSkipped, "only when it uninstalls"},
		{"sealed, the executor's own identity", hookEvidence{deleteHooks: 1, sealed: alice, digest: "sha256:1"}, hooksSkipped, "only when it uninstalls"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decideDeleteHooks(tc.e)
			if got.run != tc.want || !strings.Contains(got.why, tc.why) {
				t.Errorf("got %d %q, want %d with %q", got.run, got.why, tc.want, tc.why)
			}
		})
	}
}

// createsKube records the hooks it is asked to create (kubefake builds no resources).
type createsKube struct {
	kubefake.PrintingKubeClient
	mu      sync.Mutex
	creates int
}

func (k *createsKube) Create(r kube.ResourceList) (*kube.Result, error) {
	k.mu.Lock()
	k.creates++
	k.mu.Unlock()
	return k.PrintingKubeClient.Create(r)
}

func (k *createsKube) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.creates
}

const preDeleteHook = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-cleanup\n  annotations:\n    helm.sh/hook: pre-delete\n"

// hookedRecord is revision 1 of web with one pre-delete hook, in its Secret of UID u1.
func hookedRecord(t *testing.T, si typedcorev1.SecretInterface, hookManifest string, seal *release.Deployer) {
	t.Helper()
	now := helmtime.Now()
	rel := &helmrelease.Release{Name: "web", Namespace: "ns", Version: 1, Chart: tiny("1.0.0"), Config: map[string]any{},
		Info: &helmrelease.Info{Status: helmrelease.StatusUninstalling, FirstDeployed: now, LastDeployed: now},
		Hooks: []*helmrelease.Hook{{Name: "web-cleanup", Kind: "ConfigMap", Path: "tiny/templates/hook.yaml",
			Manifest: hookManifest, Events: []helmrelease.HookEvent{helmrelease.HookPreDelete}}}}
	key := release.SecretName("web", 1)
	if err := storage.NewSecrets(si).Create(key, rel); err != nil {
		t.Fatal(err)
	}
	sec, err := si.Get(ctx(t), key, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec.UID = "u1"
	if seal != nil {
		entry, err := release.SealDeployer(hooksKey, release.SecretRef{Namespace: "ns", Name: key, UID: "u1"}, *seal)
		if err != nil {
			t.Fatal(err)
		}
		sec.Data[release.DataDeployer] = entry
	}
	if _, err := si.Update(ctx(t), sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// digestOf is the HooksDigest of the one hook hookedRecord writes with manifest m.
func digestOf(t *testing.T, m string) string {
	t.Helper()
	d, err := release.HooksDigest([]*helmrelease.Hook{{Name: "web-cleanup", Kind: "ConfigMap", Path: "tiny/templates/hook.yaml",
		Manifest: m, Events: []helmrelease.HookEvent{helmrelease.HookPreDelete}}})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// An uninstall creates the record's delete hooks only as the uninstaller, only when async-helm
// sealed the uninstaller as their writer, and only while they are the hooks it sealed: a
// revision a deployer carried a tenant's hooks into (a rollback, a chart-less upgrade) is
// sealed as the deployer, and the tenant's own uninstall must not borrow its rights.
// Everything else about the uninstall goes on: the records go.
func TestUninstallRunsHooksOnlyAsTheirSealedWriter(t *testing.T) {
	rewritten := strings.Replace(preDeleteHook, "name: web-cleanup", "name: web-cleanup\n  namespace: prod", 1)
	deployer := release.Deployer{Who: release.IdentityDigest(hooksKey, release.Identity{User: "deployer", Groups: []string{"system:serviceaccounts"}})}
	for _, tc := range []struct {
		name     string
		manifest string // the record's hook as the uninstall finds it
		seal     *release.Deployer
		caller   string
		noHooks  bool
		creates  int // hook creates through the uninstaller's client
		note     string
	}{
		{"sealed, its writer uninstalls", preDeleteHook, &deployer, "deployer", false, 1, ""},
		{"sealed as the deployer, the tenant uninstalls", preDeleteHook, &deployer, "mallory", false, 0, "only when it uninstalls"},
		{"sealed, an admin uninstalls", preDeleteHook, &deployer, "admin", false, 0, "only when it uninstalls"},
		{"rewritten by the tenant, an admin uninstalls", rewritten, &deployer, "admin", false, 0, "changed after async-helm wrote them"},
		{"never sealed, an admin uninstalls", rewritten, nil, "admin", false, 0, "did not write them"},
		{"no_hooks", preDeleteHook, &deployer, "deployer", true, 0, "asked for none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			si := fake.NewClientset().CoreV1().Secrets("ns")
			var seal *release.Deployer
			if tc.seal != nil {
				s := *tc.seal
				s.Hooks = digestOf(t, preDeleteHook) // what the deployer's action wrote
				seal = &s
			}
			hookedRecord(t, si, tc.manifest, seal)
			f, err := NewFactory(&rest.Config{Host: "http://127.0.0.1:1"})
			if err != nil {
				t.Fatal(err)
			}
			callerKube := &createsKube{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}}
			opts := []Option{withSecrets(si), WithCapabilities(chartutil.DefaultCapabilities), WithKubeClient(callerKube),
				WithImpersonation(tc.caller, "", []string{"system:serviceaccounts"}, nil)}
			req := Request{Namespace: "ns", Name: "web", Revision: 1, Timeout: time.Minute,
				DeleteHooks: DeleteHooks{Key: hooksKey, Disabled: tc.noHooks}}
			rel, err := f.Uninstall(ctx(t), req, opts...)
			if err != nil {
				t.Fatal(err)
			}
			if got := callerKube.count(); got != tc.creates {
				t.Errorf("hook creates as the uninstaller: %d, want %d", got, tc.creates)
			}
			if !strings.Contains(rel.Info.Description, tc.note) || (tc.note == "") != !strings.Contains(rel.Info.Description, "not run") {
				t.Errorf("description %q, want it to say %q", rel.Info.Description, tc.note)
			}
			if l, _ := si.List(ctx(t), metav1.ListOptions{}); len(l.Items) != 0 {
				t.Errorf("%d records left", len(l.Items))
			}
		})
	}
}

// uidKeeping keeps a Secret's UID across whole-object updates (as the API server does; the
// fake clientset stores what it is given).
type uidKeeping struct {
	typedcorev1.SecretInterface
}

func (u uidKeeping) Update(ctx context.Context, s *corev1.Secret, o metav1.UpdateOptions) (*corev1.Secret, error) {
	if cur, err := u.SecretInterface.Get(ctx, s.Name, metav1.GetOptions{}); err == nil {
		s.UID = cur.UID
	}
	return u.SecretInterface.Update(ctx, s, o)
}

// An install seals, in its record, who it ran as and the hooks its Helm wrote; the seal
// verifies only for that Secret.
func TestInstallSealsWhoWroteTheHooks(t *testing.T) {
	si, key := reservedWebOfUID(t)
	f, err := NewFactory(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	ch := tiny("1.0.0")
	ch.Templates = append(ch.Templates, &chart.File{Name: "templates/hook.yaml", Data: []byte(preDeleteHook)})
	opts := []Option{withSecrets(si), WithCapabilities(chartutil.DefaultCapabilities), WithKubeClient(&kubefake.PrintingKubeClient{Out: io.Discard}),
		WithImpersonation("alice", "a1", []string{"devs"}, map[string][]string{"scopes": {"user:full"}}),
		WithDeployerSeal(SealFor(hooksKey, "ns", "web", 1, "u1"))}
	rel, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: ch, Timeout: time.Minute}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	got, err := si.Get(ctx(t), key, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := release.OpenDeployer(hooksKey, release.SecretRef{Namespace: "ns", Name: key, UID: "u1"}, got.Data[release.DataDeployer])
	if err != nil {
		t.Fatalf("the record's seal: %v", err)
	}
	want, _ := release.HooksDigest(rel.Hooks)
	alice := release.IdentityDigest(hooksKey, release.Identity{User: "alice", UID: "a1", Groups: []string{"devs"}, Extra: map[string][]string{"scopes": {"user:full"}}})
	if d.Who != alice || d.Hooks != want || want == "" {
		t.Errorf("sealed %+v, want alice's with hooks %s", d, want)
	}
	for _, ref := range []release.SecretRef{{Namespace: "ns", Name: key, UID: "u2"}, {Namespace: "other", Name: key, UID: "u1"}} {
		if _, err := release.OpenDeployer(hooksKey, ref, got.Data[release.DataDeployer]); !errors.Is(err, release.ErrDeployerSeal) {
			t.Errorf("the seal verified for %+v: %v", ref, err)
		}
	}
}

// reservedWebOfUID is web v1 reserved (pending-install) in a fake Secrets client that keeps
// UIDs, its Secret's UID u1: what a sealed action adopts.
func reservedWebOfUID(t *testing.T) (uidKeeping, string) {
	t.Helper()
	si := uidKeeping{fake.NewClientset().CoreV1().Secrets("ns")}
	key := release.SecretName("web", 1)
	now := helmtime.Now()
	reservation := &helmrelease.Release{Name: "web", Namespace: "ns", Version: 1, Chart: &chart.Chart{Metadata: tiny("1.0.0").Metadata},
		Info: &helmrelease.Info{Status: helmrelease.StatusPendingInstall, Description: release.ReservedDescription, FirstDeployed: now, LastDeployed: now}}
	if err := storage.NewSecrets(si).Create(key, reservation); err != nil {
		t.Fatal(err)
	}
	sec, _ := si.Get(ctx(t), key, metav1.GetOptions{})
	sec.UID = "u1"
	if _, err := si.SecretInterface.Update(ctx(t), sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return si, key
}
