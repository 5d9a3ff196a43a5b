package reader

import (
	"context"
	"fmt"
	"io"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// secretsHelm is the Factory's Helm on each namespace's Secrets of a fake cluster.
type secretsHelm struct {
	f  *helmexec.Factory
	cs kubernetes.Interface
}

func (h secretsHelm) List(ctx context.Context, ns string, opts ...helmexec.Option) ([]*helmrelease.Release, error) {
	si := h.cs.CoreV1().Secrets(ns) // first: the other Secrets client wrappers apply around it
	return h.f.List(ctx, ns, append([]helmexec.Option{helmexec.WithSecretsClient(func(typedcorev1.SecretInterface) typedcorev1.SecretInterface { return si }),
		helmexec.WithKubeClient(&kubefake.PrintingKubeClient{Out: io.Discard})}, opts...)...)
}

func (h secretsHelm) History(context.Context, string, string, ...helmexec.Option) ([]*helmrelease.Release, error) {
	return nil, nil
}

func (h secretsHelm) Latest(context.Context, string, string, ...helmexec.Option) (*helmrelease.Release, error) {
	return nil, nil
}

// One list over a caller's namespaces holds one read's records, not one read's per
// namespace: two namespaces of 4 records near a record's node bound each (which together
// fill one read's) answer the first namespace's 4 and skip the second's.
func TestOneListOverManyNamespacesHasOneReadBudget(t *testing.T) {
	cs := fake.NewClientset()
	zeros := make([]any, release.MaxRecordNodes-10_000)
	for i := range zeros {
		zeros[i] = 0
	}
	now := helmtime.Now()
	for _, ns := range []string{"team-a", "team-b"} {
		d := storage.NewSecrets(cs.CoreV1().Secrets(ns))
		for i := range 4 {
			r := &helmrelease.Release{Name: fmt.Sprintf("big-%d", i), Namespace: ns, Version: 1, Config: map[string]any{"a": zeros},
				Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "0.1.0", APIVersion: "v2"}},
				Info:  &helmrelease.Info{FirstDeployed: now, LastDeployed: now, Status: helmrelease.StatusDeployed}}
			if err := d.Create(release.SecretName(r.Name, 1), r); err != nil {
				t.Fatal(err)
			}
		}
	}
	f, err := helmexec.NewFactory(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	a := &authz{may: map[string]map[string]bool{"alice": {"team-a": true, "team-b": true}}}
	idx := metaIndex{meta("team-a", "big-0", 1), meta("team-b", "big-0", 1), meta("team-c", "web", 1)} // alice may not read team-c
	s := &Service{Helm: secretsHelm{f: f, cs: cs}, Authorizer: a, Index: idx}
	out, err := s.List(ctx(t), &auth.User{Name: "alice"}, "", false)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(out.([]api.Release)); n != 4 {
		t.Errorf("one list of 2 namespaces kept %d records of %d JSON values each, want 4 (one read's %d values)",
			n, len(zeros), release.MaxReadNodes)
	}
}

// The read budget of a list over many namespaces is shared fairly: a namespace read first
// whose records would fill it leaves the other namespaces their share (H8: team-b's
// release was cut off by team-a's 5 records near a record's node bound).
func TestOneNamespaceDoesNotSpendTheWholeReadBudget(t *testing.T) {
	cs := fake.NewClientset()
	zeros := make([]any, release.MaxRecordNodes-10_000)
	for i := range zeros {
		zeros[i] = 0
	}
	now := helmtime.Now()
	create := func(ns, name string, config map[string]any) {
		r := &helmrelease.Release{Name: name, Namespace: ns, Version: 1, Config: config,
			Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "0.1.0", APIVersion: "v2"}},
			Info:  &helmrelease.Info{FirstDeployed: now, LastDeployed: now, Status: helmrelease.StatusDeployed}}
		if err := storage.NewSecrets(cs.CoreV1().Secrets(ns)).Create(release.SecretName(name, 1), r); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 5 {
		create("team-a", fmt.Sprintf("big-%d", i), map[string]any{"a": zeros})
	}
	create("team-b", "web", map[string]any{"a": zeros[:50_000]})
	f, err := helmexec.NewFactory(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	a := &authz{may: map[string]map[string]bool{"alice": {"team-a": true, "team-b": true}}}
	idx := metaIndex{meta("team-a", "big-0", 1), meta("team-b", "web", 1), meta("team-c", "web", 1)}
	s := &Service{Helm: secretsHelm{f: f, cs: cs}, Authorizer: a, Index: idx}
	out, err := s.List(ctx(t), &auth.User{Name: "alice"}, "", false)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, r := range out.([]api.Release) {
		got[r.Namespace]++
	}
	if got["team-b"] != 1 || got["team-a"] != 3 {
		t.Errorf("listed %v, want team-b's release and 3 of team-a's (within one read's %d values)", got, release.MaxReadNodes)
	}
}
