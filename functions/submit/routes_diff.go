package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/diff"
	"github.com/async-helm/async-helm/pkg/function"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/submitter"
)

// routeDiff serves POST /api/helm/release/diff: the chart routes' rate per caller, then
// the submitter's diff.
func (f *Function) routeDiff(route routeFunc) {
	route("POST "+api.PathDiff, func(w http.ResponseWriter, r *http.Request) error {
		if err := f.admit(r); err != nil {
			return err
		}
		var req api.DiffRequest
		if err := decode(w, r, &req); err != nil {
			return err
		}
		out, err := f.svc.Diff(r.Context(), req, userFrom(r.Context()))
		if err != nil {
			return err
		}
		function.WriteJSON(w, http.StatusOK, out)
		return nil
	})
}

// diffRenderer is submitter.DiffRenderer on the template route's render slots and child
// (the template route renders through it too).
type diffRenderer struct{ charts *chartRoutes }

// Slot takes a render slot of the caller's tenant (429 without one in time), its work
// bounded by the render timeout (the render child's own bound) plus diff.MaxTime (the
// comparison's): the slots' wait assumes a slot is held no longer than a render.
func (d diffRenderer) Slot(ctx context.Context, user *auth.User, namespace string) (context.Context, func(), error) {
	release, err := d.charts.renders.Take(ctx, chartsource.TenantOf(chartsource.WithCaller(ctx, callerOf(user)), namespace))
	if errors.Is(err, chartsource.ErrRendersBusy) {
		return nil, nil, &function.StatusError{Code: http.StatusTooManyRequests, Err: err, RetryAfter: time.Second}
	}
	if err != nil {
		return nil, nil, err
	}
	bound := d.charts.renderer.Limits.Timeout
	if bound <= 0 {
		bound = helmexec.DefaultRenderLimits.Timeout
	}
	bounded, cancel := context.WithTimeout(ctx, bound+diff.MaxTime)
	return bounded, func() { cancel(); release() }, nil
}

// Render renders in a child killed at its deadline: past it, or failing, 422 (the chart
// and values decide it); no child free, 429.
func (d diffRenderer) Render(ctx context.Context, job helmexec.ChartRender) (string, error) {
	job.KubeVersion, job.Budget = d.charts.repos.KubeVersion, d.charts.source.Budget
	out, err := d.charts.renderer.Render(ctx, job)
	if errors.Is(err, helmexec.ErrRenderBusy) {
		return "", &function.StatusError{Code: http.StatusTooManyRequests, Err: err, RetryAfter: time.Second}
	}
	if err != nil {
		return "", fmt.Errorf("%w: %w", submitter.ErrRender, err)
	}
	return out, nil
}
