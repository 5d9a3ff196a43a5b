package helmexec

import (
	"time"

	"helm.sh/helm/v3/pkg/kube"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
func WaitGateOf(opts ...Option) WaitGate { return optionsOf(opts).gate }

// APIGate is told around the API round trips of an action's apply (its objects created,
// updated, deleted): the executor lends the action's CPU slot meanwhile (docs/design.md,
// "Tenants and shares").
type APIGate interface {
	// Calling: Helm is about to call the API server for the release's objects.
	Calling()
	// Returned: the call returned; it never blocks.
	Returned()
}

// WithAPIGate tells g around the apply's API calls of actions run behind a fence.
func WithAPIGate(g APIGate) Option {
	return func(o *configOptions) { o.api = g }
}

// APIGateOf is the API gate opts carry (nil without WithAPIGate): fakes of Helm in tests
// call it as Helm's kube client would.
func APIGateOf(opts ...Option) APIGate { return optionsOf(opts).api }

// gated puts the gates, if any, around an action's fenced kube client. Embedding the
// fenced client keeps every optional interface it passes through.
func (o *configOptions) gated(k fencedKube) kube.Interface {
	if o.gate == nil && o.api == nil {
		return k
	}
	return gatedKube{fencedKube: k, gate: o.gate, api: o.api}
}

// gatedKube is an action's kube client whose waits tell the wait gate and whose apply
// calls the API gate.
type gatedKube struct {
	fencedKube
	gate WaitGate
	api  APIGate
}

// waiting runs one wait between Waiting and Working.
func (k gatedKube) waiting(fn func() error) error {
	if k.gate != nil {
		k.gate.Waiting()
		defer k.gate.Working()
	}
	return fn()
}

// calling runs one of the apply's calls between Calling and Returned.
func (k gatedKube) calling(fn func()) {
	if k.api != nil {
		k.api.Calling()
		defer k.api.Returned()
	}
	fn()
}

func (k gatedKube) Create(r kube.ResourceList) (res *kube.Result, err error) {
	k.calling(func() { res, err = k.fencedKube.Create(r) })
	return res, err
}

func (k gatedKube) Update(original, target kube.ResourceList, force bool) (res *kube.Result, err error) {
	k.calling(func() { res, err = k.fencedKube.Update(original, target, force) })
	return res, err
}

func (k gatedKube) Delete(r kube.ResourceList) (res *kube.Result, errs []error) {
	k.calling(func() { res, errs = k.fencedKube.Delete(r) })
	return res, errs
}

func (k gatedKube) DeleteWithPropagationPolicy(r kube.ResourceList, policy metav1.DeletionPropagation) (res *kube.Result, errs []error) {
	k.calling(func() { res, errs = k.fencedKube.DeleteWithPropagationPolicy(r, policy) })
	return res, errs
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
