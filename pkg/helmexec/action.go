package helmexec

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release/storage"
)

// helm is what differs per engine: the verbs as one Helm major runs them (v3 beside each
// verb, v4 in v4actions.go). What is around them is written once: the reservation
// adopted, the fence, the chart and values read and rendered in a worker.
type helm interface {
	install(ctx context.Context, req Request, ch *chart.Chart, values map[string]any) (*helmrelease.Release, error)
	upgrade(ctx context.Context, req Request, ch *chart.Chart, values map[string]any) (*helmrelease.Release, error)
	rollback(req Request) error
	uninstall(req Request) (*helmrelease.Release, error)
}

// configure is an action's Helm on the factory's engine, and Helm v3's configuration over
// the same storage chain (base); ctx ends a v4 action's waits.
func (f *Factory) configure(ctx context.Context, namespace string, opts []Option) (*action.Configuration, helm, error) {
	if f.v4() {
		cfg4, cfg, err := f.configureV4(ctx, namespace, opts)
		return cfg, v4Helm{cfg: cfg4, read: cfg}, err
	}
	cfg, err := f.Configuration(namespace, opts...)
	return cfg, v3Helm{cfg}, err
}

// prepared is an action on a reservation: its Helm, the v3 configuration it reads through,
// the reservation's adopter, and the fence it runs behind (the caller's, or its own).
type prepared struct {
	helm
	cfg     *action.Configuration
	adopter *storage.AdoptingDriver
	fence   *Fence
}

func (f *Factory) prepare(ctx context.Context, req Request, opts []Option) (*prepared, error) {
	p := &prepared{fence: FenceOf(opts...)}
	if p.fence == nil {
		p.fence = &Fence{}
		opts = append(opts, WithFence(p.fence))
	}
	// Last, so the adopter wraps whatever storage the options give (fault injection in tests).
	opts = append(opts, WithStorageWrapper(func(d storage.Driver) storage.Driver {
		p.adopter = storage.NewAdoptingDriver(d, req.Name, req.Revision)
		return p.adopter
	}))
	var err error
	if p.cfg, p.helm, err = f.configure(ctx, req.Namespace, opts); err != nil {
		return nil, err
	}
	if req.Atomic {
		p.adopter.AllowAtomicRollback()
	}
	return p, nil
}

// rendered runs an install or (upgrade) an upgrade whose templates render in a worker.
func (f *Factory) rendered(ctx context.Context, req Request, opts []Option, upgrade bool) (rel *helmrelease.Release, err error) {
	fz, err := newFrozen() // its storage wrapper keeps the real chart in Helm's records
	if err != nil {
		return nil, err
	}
	p, err := f.prepare(ctx, req, append(opts, WithStorageWrapper(fz.storage)))
	if err != nil {
		return nil, err
	}
	defer func() { err = checkAdopted(p.adopter, err) }()
	ch, values, run := req.Chart, req.Values, p.install
	if upgrade {
		if ch, err = upgradeChart(p.cfg, req); err != nil {
			return nil, err
		}
		if values, err = upgradeValues(p.cfg, req); err != nil {
			return nil, err
		}
		run = p.upgrade
	}
	if req.Annotate != nil {
		if err = req.Annotate(ch); err != nil {
			return nil, err
		}
	}
	if ch, err = f.renderOut(ctx, fz, p.cfg, req, WaitGateOf(opts...), ch, values, upgrade); err != nil {
		return nil, err
	}
	rel, err = runBounded(ctx, p.fence, func() (*helmrelease.Release, error) {
		return run(context.WithoutCancel(ctx), req, ch, values)
	})
	fz.thaw(rel)
	return rel, err
}

// checkAdopted makes an action that never reached the reservation an error: Helm refused
// before storing anything (bad chart, RBAC, ...), and the reservation must be failed by
// the caller with that reason.
func checkAdopted(a *storage.AdoptingDriver, err error) error {
	if err != nil && !a.Adopted() {
		return fmt.Errorf("%w (the reservation was not adopted)", err)
	}
	return err
}
