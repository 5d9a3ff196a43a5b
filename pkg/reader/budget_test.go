package reader

import (
	"context"
	"errors"
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

// bigConfig is a release's values of about n JSON values.
func bigConfig(n int) map[string]any { return map[string]any{"a": make([]any, n)} }

// helmRecord writes release name (version 1) with config into ns of cs as Helm does.
func helmRecord(t *testing.T, cs *fake.Clientset, ns, name string, config map[string]any) {
	t.Helper()
	now := helmtime.Now()
	r := &helmrelease.Release{Name: name, Namespace: ns, Version: 1, Config: config,
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "0.1.0", APIVersion: "v2"}},
		Info:  &helmrelease.Info{FirstDeployed: now, LastDeployed: now, Status: helmrelease.StatusDeployed}}
	if err := storage.NewSecrets(cs.CoreV1().Secrets(ns)).Create(release.SecretName(name, 1), r); err != nil {
		t.Fatal(err)
	}
}

// listAsAlice lists every namespace alice may read (team-a and team-b) without limitInfo.
func listAsAlice(t *testing.T, cs *fake.Clientset) (map[string]int, error) {
	t.Helper()
	f, err := helmexec.NewFactory(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	a := &authz{may: map[string]map[string]bool{"alice": {"team-a": true, "team-b": true}}}
	idx := metaIndex{meta("team-a", "big-0", 1), meta("team-b", "big-0", 1), meta("team-c", "web", 1)} // alice may not read team-c
	s := &Service{Helm: secretsHelm{f: f, cs: cs}, Authorizer: a, Index: idx}
	out, err := s.List(ctx(t), &auth.User{Name: "alice"}, "", false)
	if err != nil {
		return nil, err
	}
	got := map[string]int{}
	for _, r := range out.([]api.Release) {
		got[r.Namespace]++
	}
	return got, nil
}

// One list over a caller's namespaces keeps one slot's share of records in all, not one
// per namespace (records near a record's node bound: 2 fit). Past it the list is refused
// whole, whichever namespace holds them: never answered without another namespace's
// releases (H8: team-b's release was cut off by team-a's records) or without some of its own.
func TestOneListOverManyNamespacesKeepsOneSlotsRecords(t *testing.T) {
	for _, tc := range []struct {
		name   string
		a, b   int // records of team-a and team-b
		refuse bool
	}{
		{"within the share", 1, 1, false},
		{"past it in both", 4, 4, true},
		{"past it in the namespace read first", 5, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewClientset()
			for ns, n := range map[string]int{"team-a": tc.a, "team-b": tc.b} {
				for i := range n {
					helmRecord(t, cs, ns, fmt.Sprintf("big-%d", i), bigConfig(release.MaxRecordNodes-10_000))
				}
			}
			got, err := listAsAlice(t, cs)
			switch {
			case tc.refuse && !errors.Is(err, ErrTooLarge):
				t.Errorf("listed %v (%v), want ErrTooLarge past %d values", got, err, release.MaxReadNodes/slotShare)
			case !tc.refuse && (err != nil || got["team-a"] != tc.a || got["team-b"] != tc.b):
				t.Errorf("listed %v (%v), want %d of team-a and %d of team-b", got, err, tc.a, tc.b)
			}
		})
	}
}
