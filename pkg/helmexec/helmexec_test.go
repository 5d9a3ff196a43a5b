package helmexec

import (
	"context"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	kube4 "helm.sh/helm/v4/pkg/kube"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// A factory whose actions never reach a cluster: Helm's memory driver stores the
// releases, kubefake applies the manifests.
func offline(t *testing.T) (*Factory, *storage.Memory, []Option) {
	t.Helper()
	f, err := NewFactory(&rest.Config{Host: "http://127.0.0.1:1"}) // never dialled
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(f.renders.Close)
	mem := storage.NewMemory()
	mem.SetNamespace("ns")
	return f, mem, []Option{WithDriver(mem), WithCapabilities(chartutil.DefaultCapabilities),
		WithKubeClient(&kubefake.PrintingKubeClient{Out: io.Discard})}
}

func tiny(version string) *chart.Chart {
	return &chart.Chart{
		Metadata:  &chart.Metadata{Name: "tiny", Version: version, APIVersion: "v2"},
		Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  v: {{ .Values.v | quote }}\n")}},
		Values:    map[string]any{"v": "default"},
	}
}

// reserve puts a reservation into storage as pkg/release writes it.
func reserve(t *testing.T, mem *storage.Memory, name string, rev int, status helmrelease.Status) {
	t.Helper()
	now := helmtime.Now()
	rel := &helmrelease.Release{Name: name, Namespace: "ns", Version: rev, Chart: &chart.Chart{Metadata: tiny("1.0.0").Metadata},
		Info: &helmrelease.Info{Status: status, Description: release.ReservedDescription, FirstDeployed: now, LastDeployed: now}}
	if err := mem.Create(release.SecretName(name, rev), rel); err != nil {
		t.Fatal(err)
	}
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

func get(t *testing.T, mem *storage.Memory, name string, rev int) *helmrelease.Release {
	t.Helper()
	r, err := mem.Get(release.SecretName(name, rev))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestInstallAdoptsTheReservation(t *testing.T) {
	f, mem, opts := offline(t)
	reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
	rel, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: tiny("1.0.0"),
		Values: map[string]any{"v": "mine"}, Labels: map[string]string{release.LabelRequestID: "r1"}, Description: "by test"}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if rel.Version != 1 || rel.Info.Status != helmrelease.StatusDeployed || !strings.Contains(rel.Manifest, `v: "mine"`) {
		t.Errorf("release v%d %s, manifest %q", rel.Version, rel.Info.Status, rel.Manifest)
	}
	stored := get(t, mem, "web", 1)
	if stored.Info.Status != helmrelease.StatusDeployed || stored.Info.Description != "by test" || stored.Labels[release.LabelRequestID] != "r1" {
		t.Errorf("stored %s %q labels %v", stored.Info.Status, stored.Info.Description, stored.Labels)
	}
	if all, _ := mem.List(func(*helmrelease.Release) bool { return true }); len(all) != 1 {
		t.Errorf("%d revisions stored, want the adopted reservation only", len(all))
	}
}

func TestUpgradeReusesDeployedChart(t *testing.T) {
	f, mem, opts := offline(t)
	reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
	if _, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: tiny("1.0.0")}, opts...); err != nil {
		t.Fatal(err)
	}
	reserve(t, mem, "web", 2, helmrelease.StatusPendingUpgrade)
	rel, err := f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2, Values: map[string]any{"v": "two"}}, opts...)
	if err != nil {
		t.Fatal(err)
	}
	if rel.Version != 2 || rel.Info.Status != helmrelease.StatusDeployed || rel.Chart.Metadata.Version != "1.0.0" || !strings.Contains(rel.Manifest, `v: "two"`) {
		t.Errorf("upgrade v%d %s chart %s", rel.Version, rel.Info.Status, rel.Chart.Metadata.Version)
	}
	if st := get(t, mem, "web", 1).Info.Status; st != helmrelease.StatusSuperseded {
		t.Errorf("v1 is %s", st)
	}
	// With a chart named, that chart runs.
	reserve(t, mem, "web", 3, helmrelease.StatusPendingUpgrade)
	rel, err = f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 3, Chart: tiny("2.0.0")}, opts...)
	if err != nil || rel.Chart.Metadata.Version != "2.0.0" {
		t.Fatalf("upgrade to 2.0.0: %v", err)
	}
}

func TestAdoptionRefusals(t *testing.T) {
	for _, tc := range []struct {
		name    string
		setup   func(t *testing.T, mem *storage.Memory)
		rev     int
		kube    *kubefake.FailingKubeClient
		want    error
		adopted bool
		status  helmrelease.Status // of the reservation afterwards
	}{
		// Someone ran `helm install` by hand first: Helm sees a name in use (our reservation
		// is hidden, theirs is not).
		{"history changed under the reservation", func(t *testing.T, mem *storage.Memory) {
			reserve(t, mem, "web", 1, helmrelease.StatusDeployed)
			reserve(t, mem, "web", 2, helmrelease.StatusPendingInstall)
		}, 2, nil, nil, false, helmrelease.StatusPendingInstall},
		// Helm computes revision 1 but 3 is reserved: a second revision must never appear.
		{"another key than the reservation", func(t *testing.T, mem *storage.Memory) {
			reserve(t, mem, "web", 3, helmrelease.StatusPendingInstall)
		}, 3, nil, release.ErrConflict, false, helmrelease.StatusPendingInstall},
		// The reservation was taken back: nothing to adopt.
		{"no reservation", func(*testing.T, *storage.Memory) {}, 1, nil, nil, false, ""},
		// Helm failed after adopting: the failure is recorded in the reservation.
		{"wait failed", func(t *testing.T, mem *storage.Memory) {
			reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
		}, 1, &kubefake.FailingKubeClient{PrintingKubeClient: kubefake.PrintingKubeClient{Out: io.Discard}, WaitError: errors.New("deployment not ready")},
			nil, true, helmrelease.StatusFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, mem, opts := offline(t)
			tc.setup(t, mem)
			if tc.kube != nil {
				opts = append(opts, WithKubeClient(tc.kube))
			}
			_, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: tc.rev, Chart: tiny("1.0.0"), Wait: tc.kube != nil}, opts...)
			if err == nil {
				t.Fatal("install succeeded")
			}
			if tc.want != nil && !errors.Is(err, tc.want) {
				t.Errorf("error %v, want %v", err, tc.want)
			}
			if notAdopted := strings.Contains(err.Error(), "the reservation was not adopted"); notAdopted == tc.adopted {
				t.Errorf("adopted %v, error %v", tc.adopted, err)
			}
			if tc.status != "" {
				if st := get(t, mem, "web", tc.rev).Info.Status; st != tc.status {
					t.Errorf("reservation is %s, want %s", st, tc.status)
				}
			}
			if _, err := mem.Get(release.SecretName("web", 1)); tc.rev == 3 && err == nil {
				t.Error("Helm's own revision 1 was created beside the reservation")
			}
		})
	}
}

func TestWrappersApplyAroundTheDriver(t *testing.T) {
	f, mem, opts := offline(t)
	var order []string
	wrap := func(name string) Option {
		return WithStorageWrapper(func(d storage.Driver) storage.Driver { order = append(order, name); return d })
	}
	cfg, err := f.Configuration("ns", append(opts, wrap("first"), wrap("second"))...)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(order, ",") != "first,second" || cfg.Capabilities != chartutil.DefaultCapabilities {
		t.Errorf("wrappers %v, capabilities %v", order, cfg.Capabilities)
	}
	if _, ok := cfg.KubeClient.(*kubefake.PrintingKubeClient); !ok {
		t.Errorf("kube client %T", cfg.KubeClient)
	}
	reserve(t, mem, "web", 1, helmrelease.StatusDeployed)
	if _, err := cfg.Releases.Get("web", 1); err != nil {
		t.Errorf("the configuration does not read the given driver: %v", err)
	}
	// Without options: Helm's Secrets driver and Helm's own kube client.
	cfg, err = f.Configuration("ns")
	if err != nil || cfg.Releases.Driver.Name() != storage.SecretsDriverName || cfg.Capabilities != nil {
		t.Errorf("default configuration: %v, driver %s", err, cfg.Releases.Driver.Name())
	}
}

func TestActionMapping(t *testing.T) {
	req := Request{Namespace: "ns", Name: "web", Timeout: 3 * time.Minute, Wait: true, WaitForJobs: true, Atomic: true,
		Description: "d", Labels: map[string]string{"a": "b"}}
	i := newInstall(&action.Configuration{}, req)
	if i.ReleaseName != "web" || i.Namespace != "ns" || i.Timeout != 3*time.Minute || !i.Wait || !i.WaitForJobs || !i.Atomic ||
		i.Description != "d" || i.Labels["a"] != "b" {
		t.Errorf("install %+v", i)
	}
	u := newUpgrade(&action.Configuration{}, req)
	if u.Namespace != "ns" || u.Timeout != 3*time.Minute || !u.Wait || !u.WaitForJobs || !u.Atomic || u.Description != "d" || u.Labels["a"] != "b" {
		t.Errorf("upgrade %+v", u)
	}
}

func TestCheckDependencies(t *testing.T) {
	ch := tiny("1.0.0")
	ch.Metadata.Dependencies = []*chart.Dependency{{Name: "redis", Version: "1.x", Repository: "https://x"}}
	if err := CheckDependencies(ch, nil); !errors.Is(err, ErrMissingDependency) {
		t.Errorf("enabled missing dependency: %v", err)
	}
	off := tiny("1.0.0")
	off.Metadata.Dependencies = []*chart.Dependency{{Name: "redis", Version: "1.x", Repository: "https://x", Condition: "redis.enabled"}}
	if err := CheckDependencies(off, map[string]any{"redis": map[string]any{"enabled": false}}); err != nil {
		t.Errorf("disabled missing dependency: %v", err)
	}
	if err := CheckDependencies(tiny("1.0.0"), nil); err != nil {
		t.Errorf("no dependencies: %v", err)
	}
}

func TestReads(t *testing.T) {
	f, mem, opts := offline(t)
	reserve(t, mem, "web", 1, helmrelease.StatusSuperseded)
	reserve(t, mem, "web", 2, helmrelease.StatusFailed)
	reserve(t, mem, "db", 1, helmrelease.StatusPendingInstall)
	rels, err := f.List(ctx(t), "ns", opts...)
	if err != nil || len(rels) != 2 {
		t.Fatalf("List = %d, %v", len(rels), err)
	}
	hist, err := f.History(ctx(t), "ns", "web", opts...)
	if err != nil || len(hist) != 2 {
		t.Fatalf("History = %d, %v", len(hist), err)
	}
	latest, err := f.Latest(ctx(t), "ns", "web", opts...)
	if err != nil || latest.Version != 2 || latest.Info.Status != helmrelease.StatusFailed {
		t.Fatalf("Latest = %v, %v", latest, err)
	}
	if _, err := f.History(ctx(t), "ns", "none", opts...); !errors.Is(err, release.ErrNotFound) {
		t.Errorf("History of nothing: %v", err)
	}
	if _, err := f.Latest(ctx(t), "ns", "none", opts...); !errors.Is(err, release.ErrNotFound) {
		t.Errorf("Latest of nothing: %v", err)
	}
}

// An upgrade that names no chart needs a deployed revision to take it from.
func TestUpgradeWithoutDeployedRevision(t *testing.T) {
	f, mem, opts := offline(t)
	reserve(t, mem, "web", 1, helmrelease.StatusFailed)
	reserve(t, mem, "web", 2, helmrelease.StatusPendingUpgrade)
	_, err := f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2}, opts...)
	if err == nil || !strings.Contains(err.Error(), "find the deployed chart of ns/web to reuse") {
		t.Errorf("Upgrade: %v", err)
	}
	if st := get(t, mem, "web", 2).Info.Status; st != helmrelease.StatusPendingUpgrade {
		t.Errorf("the reservation was touched: %s", st)
	}
}

// withSecrets stores releases through si (a fake clientset's) instead of the namespace's
// Secrets; given first, the other Secrets client wrappers apply around it.
func withSecrets(si typedcorev1.SecretInterface) Option {
	return WithSecretsClient(func(typedcorev1.SecretInterface) typedcorev1.SecretInterface { return si })
}

// WithV4KubeClient applies a v4 action's manifests through kc instead of the cluster
// (Helm v4's kube/fake); WithKubeClient's is the v3 engine's.
func WithV4KubeClient(kc kube4.Interface) Option {
	return func(o *configOptions) { o.kube4 = kc }
}
