package helmexec

import (
	"errors"
	"io"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"
	kube "helm.sh/helm/v3/pkg/kube"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	helmrelease "helm.sh/helm/v3/pkg/release"
	kube4 "helm.sh/helm/v4/pkg/kube"
	kubefake4 "helm.sh/helm/v4/pkg/kube/fake"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// parse reads a manifest as the kube clients' Build does (cli-runtime's StreamVisitor:
// each document through the YAML-or-JSON decoder, which writes every alias out as JSON)
// and stops there: the printing clients' Build parses nothing.
func parse(r io.Reader) error {
	d := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for {
		var ext k8sruntime.RawExtension
		if err := d.Decode(&ext); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

type parsingKube struct{ *kubefake.PrintingKubeClient }

func (k parsingKube) Build(r io.Reader, _ bool) (kube.ResourceList, error) { return nil, parse(r) }

type parsingKube4 struct{ *kubefake4.PrintingKubeClient }

func (k parsingKube4) Build(r io.Reader, _ bool) (kube4.ResourceList, error) { return nil, parse(r) }

// parsingOffline is offline's factory on engine e with a kube client that parses what
// Helm hands it, as the real one does.
func parsingOffline(t *testing.T, e Engine) (*Factory, *storage.Memory, []Option) {
	t.Helper()
	f, mem, opts := offlineEngine(t, e)
	kc := WithKubeClient(parsingKube{&kubefake.PrintingKubeClient{Out: io.Discard}})
	if e == EngineV4 {
		kc = WithV4KubeClient(parsingKube4{&kubefake4.PrintingKubeClient{Out: io.Discard}})
	}
	return f, mem, append(opts[:2], kc)
}

// recordBomb is a manifest of one document whose anchored scalar of size bytes is aliased
// n times: about size*n bytes once a parser writes the aliases out.
func recordBomb(size, n int) string {
	var b strings.Builder
	b.WriteString("---\n# Source: tiny/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\nx: &a \"")
	b.WriteString(strings.Repeat("A", size))
	b.WriteString("\"\ny: [*a")
	b.WriteString(strings.Repeat(", *a", n-1))
	b.WriteString("]\n")
	return b.String()
}

// rewriteManifest makes revision v of web hold manifest (and status st), as a tenant who
// may write Secrets does by hand. It returns the record's size as a Secret stores it.
func rewriteManifest(t *testing.T, mem *storage.Memory, v int, st helmrelease.Status, manifest string) int {
	t.Helper()
	rel := get(t, mem, "web", v)
	rel.Manifest, rel.Info.Status = manifest, st
	if err := mem.Update(release.SecretName("web", v), rel); err != nil {
		t.Fatal(err)
	}
	payload, err := release.EncodeRelease(rel)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := release.DecodeRelease(payload); err != nil {
		t.Fatalf("the guarded decode refuses the record already: %v", err)
	}
	return len(payload)
}

// allocated is what fn allocates in this process (the render workers are processes of
// their own).
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// A record is read from the tenant's namespace: a small Secret whose manifest aliases a
// large string hundreds of times passes the guarded decode, and Helm's upgrade, rollback
// and uninstall parse it with every alias written out. Each verb, on both engines, is
// refused before Helm parses it, and allocates little doing so.
func TestRecordManifestsAreMeasuredBeforeHelmParsesThem(t *testing.T) {
	const maxAllocated = 32 << 20
	bomb := recordBomb(256<<10, 400) // ~100 MiB written out
	verbs := []struct {
		name string
		run  func(t *testing.T, f *Factory, mem *storage.Memory, opts []Option) (int, error)
	}{
		{"upgrade", func(t *testing.T, f *Factory, mem *storage.Memory, opts []Option) (int, error) {
			size := rewriteManifest(t, mem, 2, helmrelease.StatusDeployed, bomb)
			reserve(t, mem, "web", 3, helmrelease.StatusPendingUpgrade)
			var err error
			n := allocated(func() {
				_, err = f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 3, Chart: tiny("3.0.0")}, opts...)
			})
			t.Logf("upgrade over a %d-byte record: %d MiB allocated, %v", size, n>>20, err)
			return int(n), err
		}},
		{"rollback", func(t *testing.T, f *Factory, mem *storage.Memory, opts []Option) (int, error) {
			size := rewriteManifest(t, mem, 1, helmrelease.StatusSuperseded, bomb)
			reserve(t, mem, "web", 3, helmrelease.StatusPendingRollback)
			var err error
			n := allocated(func() {
				_, err = f.Rollback(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 3, RollbackTo: 1,
					RollbackPin: pinOf(t, mem, 1)}, opts...)
			})
			t.Logf("rollback onto a %d-byte record: %d MiB allocated, %v", size, n>>20, err)
			return int(n), err
		}},
		{"uninstall", func(t *testing.T, f *Factory, mem *storage.Memory, opts []Option) (int, error) {
			size := rewriteManifest(t, mem, 2, helmrelease.StatusUninstalling, bomb)
			var err error
			n := allocated(func() {
				_, err = f.Uninstall(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2}, opts...)
			})
			t.Logf("uninstall of a %d-byte record: %d MiB allocated, %v", size, n>>20, err)
			return int(n), err
		}},
	}
	for _, e := range []Engine{EngineV3, EngineV4} {
		for _, v := range verbs {
			t.Run(string(e)+"/"+v.name, func(t *testing.T) {
				f, mem, opts := parsingOffline(t, e)
				deployedTwice(t, f, mem, opts)
				n, err := v.run(t, f, mem, opts)
				if n > maxAllocated {
					t.Errorf("%s allocated %d MiB, over %d MiB", v.name, n>>20, maxAllocated>>20)
				}
				if !errors.Is(err, storage.ErrManifestsTooLarge) {
					t.Errorf("%s: %v, want %v", v.name, err, storage.ErrManifestsTooLarge)
				}
			})
		}
	}
}

// GitLab 6.5.4's records, written from renders in a worker, are within the bounds: they
// upgrade, roll back and uninstall on either engine.
func TestGitLabRecordsPassTheMeasure(t *testing.T) {
	values, err := chartutil.ReadValuesFile(filepath.Join("..", "..", "testdata", "charts", "gitlab-values-offline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	pool := workers(t)
	for _, e := range []Engine{EngineV3, EngineV4} {
		t.Run(string(e), func(t *testing.T) {
			f, mem, opts := offlineEngine(t, e, WithRenderWorkers(pool))
			gitlab := chartDir("gitlab-6.5.4.tgz")
			reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
			if _, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: gitlab(t), Values: values}, opts...); err != nil {
				t.Fatal(err)
			}
			reserve(t, mem, "web", 2, helmrelease.StatusPendingUpgrade)
			if _, err := f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2, Chart: gitlab(t), Values: values}, opts...); err != nil {
				t.Fatalf("upgrade: %v", err)
			}
			reserve(t, mem, "web", 3, helmrelease.StatusPendingRollback)
			if _, err := f.Rollback(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 3, RollbackTo: 1, RollbackPin: pinOf(t, mem, 1)}, opts...); err != nil {
				t.Fatalf("rollback: %v", err)
			}
			v3 := get(t, mem, "web", 3)
			t.Logf("GitLab's record: %d KiB of manifest, %d hooks", len(v3.Manifest)>>10, len(v3.Hooks))
			v3.Info.Status = helmrelease.StatusUninstalling
			if err := mem.Update(release.SecretName("web", 3), v3); err != nil {
				t.Fatal(err)
			}
			if _, err := f.Uninstall(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 3}, opts...); err != nil {
				t.Fatalf("uninstall: %v", err)
			}
		})
	}
}
