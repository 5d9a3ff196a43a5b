package helmexec

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	action4 "helm.sh/helm/v4/pkg/action"
	kube4 "helm.sh/helm/v4/pkg/kube"
	releasei4 "helm.sh/helm/v4/pkg/release"
	common4 "helm.sh/helm/v4/pkg/release/common"
	release4 "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// The v4 engine's verbs: the same reservation, fence, values check and bounds as the v3
// engine's (install.go, upgrade.go, rollback.go, uninstall.go), on Helm v4's actions.

// adoptingV4 is adoptingConfiguration for a Helm v4 action.
func (f *Factory) adoptingV4(ctx context.Context, req Request, opts []Option) (*action4.Configuration, *storage.AdoptingDriver, *Fence, error) {
	var adopter *storage.AdoptingDriver
	fence := FenceOf(opts...)
	if fence == nil {
		fence = &Fence{}
		opts = append(opts, WithFence(fence))
	}
	opts = append(opts, WithStorageWrapper(func(d storage.Driver) storage.Driver {
		adopter = storage.NewAdoptingDriver(d, req.Name, req.Revision)
		return adopter
	}))
	cfg, err := f.configurationV4(ctx, req.Namespace, opts)
	if err != nil {
		return nil, nil, nil, err
	}
	cfg.Releases.MaxHistory = req.MaxHistory
	if req.Atomic {
		adopter.AllowAtomicRollback()
	}
	return cfg, adopter, fence, nil
}

// waitStrategy: `wait` is kstatus's watcher; without it Helm v4 waits for hooks only, as
// Helm v3 (and the console) do.
func waitStrategy(req Request) kube4.WaitStrategy {
	if req.Wait || req.WaitForJobs || req.Atomic {
		return kube4.StatusWatcherStrategy
	}
	return kube4.HookOnlyStrategy
}

// v4Out is Helm v4's answer as the executor's type.
func v4Out(rel releasei4.Releaser, err error) (*helmrelease.Release, error) {
	err = applyConflict(err)
	if rel == nil {
		return nil, err
	}
	r4, cerr := asV4(rel)
	if cerr != nil {
		return nil, cerr
	}
	r3, cerr := releaseV3(r4)
	if cerr != nil {
		return nil, cerr
	}
	return r3, err
}

func (f *Factory) installV4(ctx context.Context, req Request, opts []Option) (*helmrelease.Release, error) {
	out, opts, err := renderOutOptions(opts)
	if err != nil {
		return nil, err
	}
	cfg, adopter, fence, err := f.adoptingV4(ctx, req, opts)
	if err != nil {
		return nil, err
	}
	if err := annotate(req, req.Chart); err != nil {
		return nil, checkAdopted(adopter, err)
	}
	ch3, err := f.renderOutV4(ctx, out, cfg, req, WaitGateOf(opts...), req.Chart, req.Values, false)
	if err != nil {
		return nil, checkAdopted(adopter, err)
	}
	ch, err := chartV4(ch3)
	if err != nil {
		return nil, err
	}
	i := newInstallV4(cfg, req)
	// Helm v4's install goes on in the background when its context ends: it gets one that
	// does not end, its waits end with ctx (v4Kube), and the fence stops the rest.
	rel, err := runBounded(ctx, fence, func() (*helmrelease.Release, error) {
		return v4Out(i.RunWithContext(context.WithoutCancel(ctx), ch, req.Values))
	})
	out.thaw(rel)
	return rel, checkAdopted(adopter, err)
}

func (f *Factory) upgradeV4(ctx context.Context, req Request, opts []Option) (*helmrelease.Release, error) {
	out, opts, err := renderOutOptions(opts)
	if err != nil {
		return nil, err
	}
	cfg, adopter, fence, err := f.adoptingV4(ctx, req, opts)
	if err != nil {
		return nil, err
	}
	ch3, err := upgradeChartV4(cfg, req)
	if err != nil {
		return nil, err
	}
	if err := annotate(req, ch3); err != nil {
		return nil, checkAdopted(adopter, err)
	}
	values, err := upgradeValuesV4(cfg, req)
	if err != nil {
		return nil, checkAdopted(adopter, err)
	}
	if ch3, err = f.renderOutV4(ctx, out, cfg, req, WaitGateOf(opts...), ch3, values, true); err != nil {
		return nil, checkAdopted(adopter, err)
	}
	ch, err := chartV4(ch3)
	if err != nil {
		return nil, err
	}
	u := newUpgradeV4(cfg, req)
	rel, err := runBounded(ctx, fence, func() (*helmrelease.Release, error) {
		return v4Out(u.RunWithContext(context.WithoutCancel(ctx), req.Name, ch, values))
	})
	out.thaw(rel)
	return rel, checkAdopted(adopter, err)
}

// newInstallV4 maps a request onto Helm v4's Install.
func newInstallV4(cfg *action4.Configuration, req Request) *action4.Install {
	i := action4.NewInstall(cfg)
	i.ReleaseName, i.Namespace = req.Name, req.Namespace
	i.Timeout, i.WaitStrategy, i.WaitForJobs = req.Timeout, waitStrategy(req), req.WaitForJobs
	i.RollbackOnFailure = req.Atomic
	i.Description, i.Labels, i.Replace = req.Description, req.Labels, req.Replace
	i.ServerSideApply = req.ServerSide == "true" || (req.ServerSide == "auto" && req.Replace && lastApplyMethod(cfg, req.Name) == "ssa")
	i.ForceConflicts = req.ForceConflicts && i.ServerSideApply
	i.SkipSchemaValidation = true // checked in the worker, within its bounds
	return i
}

// newUpgradeV4 maps a request onto Helm v4's Upgrade.
func newUpgradeV4(cfg *action4.Configuration, req Request) *action4.Upgrade {
	u := action4.NewUpgrade(cfg)
	u.Namespace, u.Timeout, u.WaitStrategy, u.WaitForJobs = req.Namespace, req.Timeout, waitStrategy(req), req.WaitForJobs
	u.RollbackOnFailure = req.Atomic
	u.Description, u.Labels, u.MaxHistory = req.Description, req.Labels, req.MaxHistory
	u.ResetValues = true // values holds the reused ones (upgradeValuesV4)
	u.ServerSideApply = serverSideOf(req)
	u.ForceConflicts = forceOf(req, func() string { return lastApplyMethod(cfg, req.Name) })
	u.SkipSchemaValidation = true // checked in the worker, within its bounds
	return u
}

// serverSideOf is Helm v4's ServerSideApply of an upgrade or rollback: client-side unless
// the request says otherwise.
func serverSideOf(req Request) string {
	switch req.ServerSide {
	case "true", "auto":
		return req.ServerSide
	}
	return "false"
}

// forceOf is Helm v4's ForceConflicts of an upgrade or rollback: a force only where the
// apply is server-side, "auto" resolved as Helm v4 resolves it, from replaced (the apply
// method of the record Helm takes it from: an upgrade's latest, a rollback's target). Helm
// v4 refuses a force with a client-side apply, also when "auto" came out client-side.
func forceOf(req Request, replaced func() string) bool {
	switch req.ServerSide {
	case "true":
		return req.ForceConflicts
	case "auto":
		return req.ForceConflicts && replaced() == string(release4.ApplyMethodServerSideApply)
	}
	return false
}

// upgradeChartV4 is the chart an upgrade runs (the request's, or the deployed one's when
// it names none, checked against the digest submit validated), as Helm v3's.
func upgradeChartV4(cfg *action4.Configuration, req Request) (*chart.Chart, error) {
	if req.Chart != nil {
		return req.Chart, nil
	}
	got, err := cfg.Releases.Deployed(req.Name)
	if err != nil {
		return nil, fmt.Errorf("find the deployed chart of %s/%s to reuse: %w", req.Namespace, req.Name, err)
	}
	cur, err := asV4(got)
	if err != nil {
		return nil, err
	}
	cur3, err := releaseV3(cur)
	if err != nil {
		return nil, err
	}
	if req.ChartDigest != "" {
		digest, err := release.ChartDigest(cur3.Chart)
		if err != nil {
			return nil, err
		}
		if digest != req.ChartDigest {
			return nil, fmt.Errorf("%w: revision %d (the deployed one) has chart %s, the request was validated against %s",
				ErrChartChanged, cur.Version, digest, req.ChartDigest)
		}
	}
	return cur3.Chart, nil
}

// upgradeValuesV4 is upgradeValues on Helm v4's storage.
func upgradeValuesV4(cfg *action4.Configuration, req Request) (map[string]any, error) {
	if len(req.Values) > 0 && !req.ReuseValues {
		return req.Values, nil
	}
	current, err := lastValuesOfV4(cfg, req.Name)
	if err != nil {
		return nil, err
	}
	return reusedValues(req, current)
}

// lastValuesOfV4 is lastValuesOf on Helm v4's storage, as Helm v3's release (nil: none).
func lastValuesOfV4(cfg *action4.Configuration, name string) (*helmrelease.Release, error) {
	last, err := latestV4(cfg.Releases.Last(name))
	if err != nil || last.Info == nil {
		return nil, nil // Helm fails the same way
	}
	current := last
	if last.Info.Status != common4.StatusDeployed {
		if current, err = latestV4(cfg.Releases.Deployed(name)); err != nil {
			if last.Info.Status != common4.StatusFailed && last.Info.Status != common4.StatusSuperseded {
				return nil, nil
			}
			current = last
		}
	}
	return releaseV3(current)
}

func latestV4(rel releasei4.Releaser, err error) (*release4.Release, error) {
	if err != nil {
		return nil, err
	}
	return asV4(rel)
}

// lastApplyMethod is the apply method of the release's latest record ("" without one).
func lastApplyMethod(cfg *action4.Configuration, name string) string {
	last, err := latestV4(cfg.Releases.Last(name))
	if err != nil || last == nil {
		return ""
	}
	return last.ApplyMethod
}

// applyMethodOf is the apply method of a revision of the release ("" without one).
func applyMethodOf(cfg *action4.Configuration, name string, version int) string {
	rel, err := latestV4(cfg.Releases.Get(name, version))
	if err != nil || rel == nil {
		return ""
	}
	return rel.ApplyMethod
}

// rollbackV4 runs with Rollback's relabel and pin wrappers in opts.
func (f *Factory) rollbackV4(ctx context.Context, req Request, opts []Option) (*helmrelease.Release, error) {
	cfg, adopter, fence, err := f.adoptingV4(ctx, req, opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r := action4.NewRollback(cfg)
	r.Version, r.Timeout, r.WaitStrategy, r.WaitForJobs = req.RollbackTo, req.Timeout, waitStrategy(req), req.WaitForJobs
	r.MaxHistory = req.MaxHistory
	r.ServerSideApply = serverSideOf(req)
	r.ForceConflicts = forceOf(req, func() string { return applyMethodOf(cfg, req.Name, req.RollbackTo) })
	// Helm v4's rollback takes no context either: its waits end with ctx, the fence stops the rest.
	_, err = runBounded(ctx, fence, func() (*helmrelease.Release, error) {
		return nil, applyConflict(r.Run(req.Name))
	})
	if err = checkAdopted(adopter, err); err != nil {
		return nil, err
	}
	return v4Out(cfg.Releases.Get(req.Name, req.Revision))
}

func (f *Factory) uninstallV4(ctx context.Context, req Request, opts []Option) (*helmrelease.Release, error) {
	cfg, err := f.configurationV4(ctx, req.Namespace, opts)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	u := action4.NewUninstall(cfg)
	u.Timeout, u.Description = req.Timeout, req.Description
	// Wait until every deleted resource is gone: "uninstalled" then means nothing is left.
	u.WaitStrategy = kube4.StatusWatcherStrategy
	u.DeletionPropagation = "background"
	rel, err := guarded(func() (*helmrelease.Release, error) {
		res, err := u.Run(req.Name)
		if res != nil && res.Release != nil {
			return v4Out(res.Release, err)
		}
		return nil, err
	})
	if err != nil {
		return rel, fmt.Errorf("uninstall %s/%s: %w", req.Namespace, req.Name, err)
	}
	return rel, nil
}

// polledWaiter is the v4 engine's waiter. Helm v4's own (kstatus's DefaultStatusWatcher) runs,
// per kind waited for, an informer over the whole namespace: every object of that kind in the
// tenant's namespace was listed and held for the whole wait, by each action. This one reads
// each waited object by name every 2 s, with the action's identity, and judges it as Helm v4's
// waits do: kstatus's status; a Job complete (WaitWithJobs, hooks); a hook Pod succeeded.
type polledWaiter struct {
	ctx context.Context // the action's: a cancel or the deadline ends the wait
	// hooksOnly (HookOnlyStrategy): only hooks are waited for.
	hooksOnly bool
	get       liveGetter
}

// judge is a waited object's status (nil: any object is still there).
type judge func(u *unstructured.Unstructured) (*status.Result, error)

func (w polledWaiter) Wait(r kube4.ResourceList, timeout time.Duration) error {
	return w.poll(r, timeout, w.hooksOnly, kstatusJudge(false))
}

func (w polledWaiter) WaitWithJobs(r kube4.ResourceList, timeout time.Duration) error {
	return w.poll(r, timeout, w.hooksOnly, kstatusJudge(true))
}

func (w polledWaiter) WaitForDelete(r kube4.ResourceList, timeout time.Duration) error {
	return w.poll(r, timeout, w.hooksOnly, nil)
}

// WatchUntilReady waits for hooks: a Job complete, a Pod succeeded, anything else at once.
func (w polledWaiter) WatchUntilReady(r kube4.ResourceList, timeout time.Duration) error {
	return w.poll(r, timeout, false, func(u *unstructured.Unstructured) (*status.Result, error) {
		switch u.GetKind() {
		case "Job":
			return kstatusJudge(true)(u)
		case "Pod":
			switch phase, _, _ := unstructured.NestedString(u.Object, "status", "phase"); phase {
			case "Succeeded":
				return &status.Result{Status: status.CurrentStatus}, nil
			case "Failed":
				return &status.Result{Status: status.FailedStatus, Message: "pod failed"}, nil
			}
			return &status.Result{Status: status.InProgressStatus, Message: "pod not succeeded"}, nil
		}
		return &status.Result{Status: status.CurrentStatus}, nil
	})
}

// kstatusJudge is kstatus's status, a paused Deployment current, and with jobs a Job current
// only once complete (kstatus's once started).
func kstatusJudge(jobs bool) judge {
	return func(u *unstructured.Unstructured) (*status.Result, error) {
		if paused, _, _ := unstructured.NestedBool(u.Object, "spec", "paused"); paused && u.GetKind() == "Deployment" {
			return &status.Result{Status: status.CurrentStatus}, nil
		}
		res, err := status.Compute(u)
		if err == nil && jobs && u.GetKind() == "Job" && res.Status == status.CurrentStatus && !jobDone4(u) {
			res = &status.Result{Status: status.InProgressStatus, Message: "job not complete"}
		}
		return res, err
	}
}

func jobDone4(u *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Complete" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// poll reads each of r every 2 s until all are current (a nil judge: all gone), one failed,
// or timeout (Helm's default when 0) or the action ends.
func (w polledWaiter) poll(r kube4.ResourceList, timeout time.Duration, skip bool, j judge) error {
	if skip || len(r) == 0 {
		return nil
	}
	if timeout <= 0 {
		timeout = kube4.DefaultStatusWatcherTimeout
	}
	ctx, cancel := context.WithTimeout(w.ctx, timeout)
	defer cancel()
	var waiting string
	// Each poll reads from the first object still waited for on: those found done before it
	// are not read again until all are, and then all once more together, so a wait on one
	// unready object does not re-read every ready one (a tenant's large Secrets) every 2 s.
	pending, all := r, true
	err := wait.PollUntilContextCancel(ctx, 2*time.Second, true, func(context.Context) (bool, error) {
		for {
			for i, info := range pending {
				var err error
				if waiting, err = w.check(info, j); waiting != "" || err != nil {
					pending, all = pending[i:], false
					return false, err
				}
			}
			if all {
				return true, nil
			}
			pending, all = r, true
		}
	})
	if err != nil && waiting != "" {
		return fmt.Errorf("%s: %w", waiting, err)
	}
	return err
}

// check says what info waits for ("" when it is done); an error is a failed one.
func (w polledWaiter) check(info *resource.Info, j judge) (string, error) {
	id := fmt.Sprintf("resource %s/%s/%s", info.Mapping.GroupVersionKind.Kind, info.Namespace, info.Name)
	obj, err := w.get(info)
	switch {
	case j == nil && apierrors.IsNotFound(err):
		return "", nil
	case j == nil:
		return id + " not deleted", nil
	case err != nil:
		return fmt.Sprintf("%s not read: %v", id, err), nil // polled again
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return "", fmt.Errorf("%s: %w", id, err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(info.Mapping.GroupVersionKind)
	res, err := j(u)
	switch {
	case err != nil:
		return "", fmt.Errorf("%s: %w", id, err)
	case res.Status == status.FailedStatus:
		return "", fmt.Errorf("%s not ready. status: %s, message: %s", id, res.Status, res.Message)
	case res.Status != status.CurrentStatus:
		return fmt.Sprintf("%s not ready. status: %s, message: %s", id, res.Status, res.Message), nil
	}
	return "", nil
}
