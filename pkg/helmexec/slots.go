package helmexec

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
