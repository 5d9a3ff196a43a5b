package helmexec

import (
	"io"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/kube"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	helmrelease "helm.sh/helm/v3/pkg/release"
)

// steps records, in order, what the gate and the kube client were asked.
type steps struct {
	mu  sync.Mutex
	log []string
}

func (s *steps) add(step string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.log = append(s.log, step)
}

func (s *steps) Waiting() { s.add("gate: waiting") }
func (s *steps) Working() { s.add("gate: working") }

// waitingKube is Helm's fake client that records its waits.
type waitingKube struct {
	*kubefake.PrintingKubeClient
	s *steps
}

func (k waitingKube) Wait(r kube.ResourceList, d time.Duration) error {
	k.s.add("kube: wait")
	return k.PrintingKubeClient.Wait(r, d)
}

// Helm's wait for readiness runs between Waiting and Working: the executor's CPU slot is
// free while the action only waits.
func TestWaitGate(t *testing.T) {
	f, mem, opts := offline(t)
	s := &steps{}
	opts = append(opts, WithKubeClient(waitingKube{&kubefake.PrintingKubeClient{Out: io.Discard}, s}), WithWaitGate(s))
	reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
	rel, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: tiny("1.0.0"), Wait: true, Timeout: time.Minute}, opts...)
	if err != nil || rel.Info.Status != helmrelease.StatusDeployed {
		t.Fatalf("install: %v, %v", rel, err)
	}
	want := []string{"gate: waiting", "kube: wait", "gate: working"}
	if len(s.log) != len(want) {
		t.Fatalf("steps %q, want %q", s.log, want)
	}
	for i := range want {
		if s.log[i] != want[i] {
			t.Fatalf("steps %q, want %q", s.log, want)
		}
	}
	if WaitGateOf(opts...) != s {
		t.Error("WaitGateOf does not give the gate back")
	}
	// The gated client keeps the optional interfaces Helm asserts (a deletion wait would
	// otherwise be skipped).
	cfg, err := f.Configuration("ns", WithFence(&Fence{}), WithWaitGate(s), WithKubeClient(&kubefake.PrintingKubeClient{Out: io.Discard}))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := cfg.KubeClient.(kube.InterfaceExt); !ok {
		t.Errorf("%T is not a kube.InterfaceExt", cfg.KubeClient)
	}
	if _, ok := cfg.KubeClient.(kube.InterfaceDeletionPropagation); !ok {
		t.Errorf("%T is not a kube.InterfaceDeletionPropagation", cfg.KubeClient)
	}
}
