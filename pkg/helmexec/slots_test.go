package helmexec

import (
	"io"
	"slices"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/kube"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	helmrelease "helm.sh/helm/v3/pkg/release"
	kube4 "helm.sh/helm/v4/pkg/kube"
	kubefake4 "helm.sh/helm/v4/pkg/kube/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// Helm's wait for readiness (and the render, in its worker) runs between Waiting and
// Working: the executor's CPU slot is free while the action only waits.
func TestWaitGate(t *testing.T) {
	f, mem, opts := offline(t)
	s := &steps{}
	opts = append(opts, WithKubeClient(waitingKube{&kubefake.PrintingKubeClient{Out: io.Discard}, s}), WithWaitGate(s))
	reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
	rel, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: tiny("1.0.0"), Wait: true, Timeout: time.Minute}, opts...)
	if err != nil || rel.Info.Status != helmrelease.StatusDeployed {
		t.Fatalf("install: %v, %v", rel, err)
	}
	want := []string{"gate: waiting", "gate: working", // the render, in its worker
		"gate: waiting", "kube: wait", "gate: working"}
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

func (s *steps) Calling()  { s.add("api: calling") }
func (s *steps) Returned() { s.add("api: returned") }

// applyingKube is Helm's fake client that records the apply's calls and its waits.
type applyingKube struct {
	*kubefake.PrintingKubeClient
	s *steps
}

func (k applyingKube) Create(r kube.ResourceList) (*kube.Result, error) {
	k.s.add("kube: create")
	return k.PrintingKubeClient.Create(r)
}

func (k applyingKube) Update(o, r kube.ResourceList, force bool) (*kube.Result, error) {
	k.s.add("kube: update")
	return k.PrintingKubeClient.Update(o, r, force)
}

func (k applyingKube) Delete(r kube.ResourceList) (*kube.Result, []error) {
	k.s.add("kube: delete")
	return k.PrintingKubeClient.Delete(r)
}

func (k applyingKube) DeleteWithPropagationPolicy(r kube.ResourceList, _ metav1.DeletionPropagation) (*kube.Result, []error) {
	k.s.add("kube: delete with propagation")
	return k.PrintingKubeClient.Delete(r)
}

func (k applyingKube) Wait(r kube.ResourceList, d time.Duration) error {
	k.s.add("kube: wait")
	return k.PrintingKubeClient.Wait(r, d)
}

// The apply's API calls (create, update, delete) run between Calling and Returned: the
// executor lends the action's CPU slot while they wait on the API server. Helm's waits
// tell the wait gate only.
func TestAPIGate(t *testing.T) {
	f, _, base := offline(t)
	s := &steps{}
	opts := append(base, WithFence(&Fence{}), WithAPIGate(s), WithWaitGate(s),
		WithKubeClient(applyingKube{&kubefake.PrintingKubeClient{Out: io.Discard}, s}))
	cfg, err := f.Configuration("ns", opts...)
	if err != nil {
		t.Fatal(err)
	}
	kc := cfg.KubeClient
	if _, err := kc.Create(nil); err != nil {
		t.Fatal(err)
	}
	if _, err := kc.Update(nil, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := kc.Wait(nil, time.Second); err != nil {
		t.Fatal(err)
	}
	dp, ok := kc.(kube.InterfaceDeletionPropagation)
	if !ok {
		t.Fatalf("%T is not a kube.InterfaceDeletionPropagation", kc)
	}
	dp.DeleteWithPropagationPolicy(nil, metav1.DeletePropagationBackground)
	kc.Delete(nil)
	want := []string{"api: calling", "kube: create", "api: returned", "api: calling", "kube: update", "api: returned",
		"gate: waiting", "kube: wait", "gate: working", "api: calling", "kube: delete with propagation", "api: returned",
		"api: calling", "kube: delete", "api: returned"}
	if !slices.Equal(s.log, want) {
		t.Errorf("steps %q, want %q", s.log, want)
	}
	if APIGateOf(opts...) != s {
		t.Error("APIGateOf does not give the gate back")
	}
}

// applyingKube4 is applyingKube for the v4 engine.
type applyingKube4 struct {
	*kubefake4.PrintingKubeClient
	s *steps
}

func (k applyingKube4) Create(r kube4.ResourceList, o ...kube4.ClientCreateOption) (*kube4.Result, error) {
	k.s.add("kube: create")
	return k.PrintingKubeClient.Create(r, o...)
}

func (k applyingKube4) Update(orig, r kube4.ResourceList, o ...kube4.ClientUpdateOption) (*kube4.Result, error) {
	k.s.add("kube: update")
	return k.PrintingKubeClient.Update(orig, r, o...)
}

func (k applyingKube4) Delete(r kube4.ResourceList, p metav1.DeletionPropagation) (*kube4.Result, []error) {
	k.s.add("kube: delete")
	return k.PrintingKubeClient.Delete(r, p)
}

// The v4 engine's apply lends the CPU slot as the v3 engine's does: Helm v4's upgrade
// updates the release's objects between Calling and Returned, and so do its client's
// creates and deletes. Before, v4 applies kept their CPU slot: ["kube: update"].
func TestAPIGateV4(t *testing.T) {
	f, mem, base := offlineEngine(t, EngineV4)
	s := &steps{}
	opts := append(base, WithAPIGate(s), WithV4KubeClient(applyingKube4{&kubefake4.PrintingKubeClient{Out: io.Discard}, s}))
	reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
	if _, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: tiny("1.0.0")}, opts...); err != nil {
		t.Fatalf("install: %v", err)
	}
	reserve(t, mem, "web", 2, helmrelease.StatusPendingUpgrade)
	if _, err := f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2, Chart: tiny("1.0.0"),
		Values: map[string]any{"v": "two"}}, opts...); err != nil {
		t.Fatalf("upgrade: %v", err)
	}
	cfg, err := f.configurationV4(ctx(t), "ns", opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.KubeClient.Create(nil); err != nil {
		t.Fatal(err)
	}
	cfg.KubeClient.Delete(nil, metav1.DeletePropagationBackground)
	want := []string{"api: calling", "kube: update", "api: returned", "api: calling", "kube: create", "api: returned",
		"api: calling", "kube: delete", "api: returned"}
	if !slices.Equal(s.log, want) {
		t.Errorf("steps %q, want %q", s.log, want)
	}
}
