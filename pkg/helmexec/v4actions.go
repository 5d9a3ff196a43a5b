package helmexec

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	action4 "helm.sh/helm/v4/pkg/action"
	chart4 "helm.sh/helm/v4/pkg/chart/v2"
	kube4 "helm.sh/helm/v4/pkg/kube"
	releasei4 "helm.sh/helm/v4/pkg/release"
	release4 "helm.sh/helm/v4/pkg/release/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/resource"
)

// v4Helm is the v4 engine's Helm (action.go): Helm v4's actions on the same storage; read
// is Helm v3's configuration over it, whose capabilities (fixed by the render) Helm v4's
// install and upgrade run with.
type v4Helm struct {
	cfg  *action4.Configuration
	read *action.Configuration
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

// chartToRun is ch as Helm v4's, with Helm v4's capabilities those the render fixed.
func (h v4Helm) chartToRun(ch *chart.Chart) (*chart4.Chart, error) {
	if c := h.read.Capabilities; c != nil {
		h.cfg.Capabilities = capsV4(c)
	}
	return chartV4(ch)
}

func (h v4Helm) install(ctx context.Context, req Request, ch *chart.Chart, values map[string]any) (*helmrelease.Release, error) {
	ch4, err := h.chartToRun(ch)
	if err != nil {
		return nil, err
	}
	h.cfg.Releases.MaxHistory = req.MaxHistory
	return v4Out(newInstallV4(h.cfg, req).RunWithContext(ctx, ch4, values))
}

func (h v4Helm) upgrade(ctx context.Context, req Request, ch *chart.Chart, values map[string]any) (*helmrelease.Release, error) {
	ch4, err := h.chartToRun(ch)
	if err != nil {
		return nil, err
	}
	return v4Out(newUpgradeV4(h.cfg, req).RunWithContext(ctx, req.Name, ch4, values))
}

// newInstallV4 maps a request onto Helm v4's Install.
func newInstallV4(cfg *action4.Configuration, req Request) *action4.Install {
	i := action4.NewInstall(cfg)
	i.ReleaseName, i.Namespace = req.Name, req.Namespace
	i.Timeout, i.WaitStrategy, i.WaitForJobs = req.Timeout, waitStrategy(req), req.WaitForJobs
	i.RollbackOnFailure = req.Atomic
	i.Description, i.Labels, i.Replace = req.Description, req.Labels, req.Replace
	i.ServerSideApply = req.ServerSide == "true" || (req.ServerSide == "auto" && req.Replace && applyMethod(cfg.Releases.Last(req.Name)) == "ssa")
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
	u.ResetValues = true // values holds the reused ones (upgradeValues)
	u.ServerSideApply = serverSideOf(req)
	u.ForceConflicts = forceOf(req, func() string { return applyMethod(cfg.Releases.Last(req.Name)) })
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

// applyMethod is the apply method of the record a read of Helm v4's storage answered (""
// without one).
func applyMethod(rel releasei4.Releaser, err error) string {
	if r, cerr := asV4(rel); err == nil && cerr == nil && r != nil {
		return r.ApplyMethod
	}
	return ""
}

func (h v4Helm) rollback(req Request) error {
	r := action4.NewRollback(h.cfg)
	r.Version, r.Timeout, r.WaitStrategy, r.WaitForJobs = req.RollbackTo, req.Timeout, waitStrategy(req), req.WaitForJobs
	r.MaxHistory = req.MaxHistory
	r.ServerSideApply = serverSideOf(req)
	r.ForceConflicts = forceOf(req, func() string { return applyMethod(h.cfg.Releases.Get(req.Name, req.RollbackTo)) })
	return applyConflict(r.Run(req.Name))
}

func (h v4Helm) uninstall(req Request) (*helmrelease.Release, error) {
	u := action4.NewUninstall(h.cfg)
	u.Timeout, u.Description = req.Timeout, req.Description
	// Wait until every deleted resource is gone: "uninstalled" then means nothing is left.
	u.WaitStrategy = kube4.StatusWatcherStrategy
	u.DeletionPropagation = "background"
	res, err := u.Run(req.Name)
	if res != nil && res.Release != nil {
		return v4Out(res.Release, err)
	}
	return nil, err
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
