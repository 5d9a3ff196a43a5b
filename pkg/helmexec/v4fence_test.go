package helmexec

import (
	"errors"
	"io"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/kube"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	helmrelease "helm.sh/helm/v3/pkg/release"
	kube4 "helm.sh/helm/v4/pkg/kube"
	kubefake4 "helm.sh/helm/v4/pkg/kube/fake"

	"github.com/async-helm/async-helm/pkg/release"
)

// endingKube ends the action's fence when the pre-upgrade hook's wait returns, as a cancel
// arriving during that wait does: Helm's upgrade goes on to apply the release, and its
// Update is refused.
type endingKube struct {
	kubefake.PrintingKubeClient
	f *Fence
}

func (k *endingKube) WatchUntilReady(kube.ResourceList, time.Duration) error {
	k.f.End()
	return nil
}

// endingKube4 is endingKube for the v4 engine (the wait is its waiter's).
type endingKube4 struct {
	kubefake4.PrintingKubeClient
	f *Fence
}

func (k *endingKube4) GetWaiterWithOptions(kube4.WaitStrategy, ...kube4.WaitOption) (kube4.Waiter, error) {
	return endingWaiter4{PrintingKubeWaiter: &kubefake4.PrintingKubeWaiter{Out: io.Discard}, f: k.f}, nil
}

type endingWaiter4 struct {
	*kubefake4.PrintingKubeWaiter
	f *Fence
}

func (w endingWaiter4) WatchUntilReady(kube4.ResourceList, time.Duration) error {
	w.f.End()
	return nil
}

// An upgrade whose action ends during its pre-upgrade hook fails with ErrActionEnded on
// both engines. Helm reads the Result of a failed Update (results.Created, Helm v3 and v4
// alike): the fenced clients return an empty one with the refusal, as Helm's own client
// does with every error, or the orphaned upgrade's goroutine dereferences nil and takes
// the executor down.
func TestUpgradeFencedOffBeforeItsApplyFailsWithoutPanic(t *testing.T) {
	hooked := tiny("1.0.0")
	hooked.Templates = append(hooked.Templates, &chart.File{Name: "templates/hook.yaml",
		Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: pre\n  annotations:\n    helm.sh/hook: pre-upgrade\n")})
	for _, engine := range []Engine{EngineV3, EngineV4} {
		t.Run(string(engine), func(t *testing.T) {
			f, mem, opts := offline(t)
			if engine == EngineV4 {
				f, mem, opts = offlineV4(t)
			}
			reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
			if _, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: hooked,
				Labels: release.Labels("r1", 1, "tiny", "1.0.0")}, opts...); err != nil {
				t.Fatalf("install: %v", err)
			}
			fence := &Fence{}
			opts = append(opts, WithFence(fence), WithKubeClient(&endingKube{kubefake.PrintingKubeClient{Out: io.Discard}, fence}),
				WithV4KubeClient(&endingKube4{kubefake4.PrintingKubeClient{Out: io.Discard}, fence}))
			reserve(t, mem, "web", 2, helmrelease.StatusPendingUpgrade)
			_, err := f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2, Chart: hooked,
				Values: map[string]any{"v": "two"}, Labels: release.Labels("r2", 2, "tiny", "1.0.0")}, opts...)
			if !errors.Is(err, ErrActionEnded) {
				t.Fatalf("upgrade fenced off during its hook: %v, want ErrActionEnded", err)
			}
		})
	}
}
