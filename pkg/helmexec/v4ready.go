package helmexec

import (
	"context"
	"fmt"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	kube4 "helm.sh/helm/v4/pkg/kube"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/async-helm/async-helm/pkg/progress"
)

// Readiness is how the executor's live progress judges a workload ready: the v3 engine
// keeps progress's own rules (Helm v3's readiness), the v4 engine kstatus's Current, the
// status its watcher waits for.
func (f *Factory) Readiness() progress.ReadyFunc {
	if !f.v4() {
		return nil
	}
	return kstatusReady
}

// workloadGroups are the API versions of the kinds progress reads.
var workloadGroups = map[string]string{"Deployment": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1", "Job": "batch/v1"}

func kstatusReady(kind string, obj runtime.Object) bool {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return false
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetKind(kind) // typed lists leave their items without kind and apiVersion
	u.SetAPIVersion(workloadGroups[kind])
	res, err := status.Compute(u)
	return err == nil && res.Status == status.CurrentStatus
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
