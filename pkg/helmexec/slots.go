package helmexec

import (
	"time"

	"helm.sh/helm/v3/pkg/kube"
	v1 "k8s.io/api/core/v1"
)

// WaitGate is told when an action's Helm starts and stops waiting on the cluster
// (readiness, a hook's completion, deletions): Helm runs render, apply and wait inside one
// call, and the executor gives the action's CPU slot back while it only waits (docs/design.md,
// "Slots: CPU-bound work and waiting").
type WaitGate interface {
	// Waiting: Helm is about to wait; the action needs no CPU slot until Working.
	Waiting()
	// Working: the wait returned; it blocks until the action holds a CPU slot again (or
	// the action ended).
	Working()
}

// WithWaitGate tells g when the action's Helm waits. It applies to actions run behind a
// fence (install, upgrade, rollback, uninstall).
func WithWaitGate(g WaitGate) Option {
	return func(o *configOptions) { o.gate = g }
}

// WaitGateOf is the gate opts carry (nil without WithWaitGate): fakes of Helm in tests
// call it as Helm's kube client would.
func WaitGateOf(opts ...Option) WaitGate {
	var o configOptions
	for _, opt := range opts {
		opt(&o)
	}
	return o.gate
}

// gated puts the gate, if any, around an action's fenced kube client. Embedding the
// fenced client keeps every optional interface it passes through.
func (o *configOptions) gated(k fencedKube) kube.Interface {
	if o.gate == nil {
		return k
	}
	return gatedKube{fencedKube: k, gate: o.gate}
}

// gatedKube is an action's kube client whose waits tell the gate.
type gatedKube struct {
	fencedKube
	gate WaitGate
}

// waiting runs one wait between Waiting and Working.
func (k gatedKube) waiting(fn func() error) error {
	k.gate.Waiting()
	defer k.gate.Working()
	return fn()
}

func (k gatedKube) Wait(r kube.ResourceList, timeout time.Duration) error {
	return k.waiting(func() error { return k.fencedKube.Wait(r, timeout) })
}

func (k gatedKube) WaitWithJobs(r kube.ResourceList, timeout time.Duration) error {
	return k.waiting(func() error { return k.fencedKube.WaitWithJobs(r, timeout) })
}

func (k gatedKube) WatchUntilReady(r kube.ResourceList, timeout time.Duration) error {
	return k.waiting(func() error { return k.fencedKube.WatchUntilReady(r, timeout) })
}

func (k gatedKube) WaitForDelete(r kube.ResourceList, timeout time.Duration) error {
	return k.waiting(func() error { return k.fencedKube.WaitForDelete(r, timeout) })
}

func (k gatedKube) WaitAndGetCompletedPodPhase(name string, timeout time.Duration) (p v1.PodPhase, err error) {
	err = k.waiting(func() error { p, err = k.fencedKube.WaitAndGetCompletedPodPhase(name, timeout); return err })
	return p, err
}
