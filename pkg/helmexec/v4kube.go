package helmexec

import (
	"context"
	"io"
	"time"

	kube4 "helm.sh/helm/v4/pkg/kube"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/resource"
)

// v4Kube is a v4 action's kube client: guarded as actionKube is, its waits ending with the
// action's context (Helm v4's wait contexts).
type v4Kube struct {
	kube4.Interface
	actionGuard
	// ctx ends the action's waits (a cancel, the deadline, the fence).
	ctx context.Context
}

var _ kube4.InterfaceWaitOptions = v4Kube{}

func (k v4Kube) Create(r kube4.ResourceList, o ...kube4.ClientCreateOption) (res *kube4.Result, err error) {
	err = k.create(r, func() (err error) { res, err = k.Interface.Create(r, o...); return err })
	return res, err
}

// Update answers a refusal with an empty Result, as actionKube does.
func (k v4Kube) Update(original, target kube4.ResourceList, o ...kube4.ClientUpdateOption) (res *kube4.Result, err error) {
	err = k.update(original, target, func(original []*resource.Info) (err error) {
		res, err = k.Interface.Update(original, target, o...)
		return err
	})
	if res == nil {
		res = &kube4.Result{}
	}
	return res, err
}

func (k v4Kube) Delete(r kube4.ResourceList, p metav1.DeletionPropagation) (*kube4.Result, []error) {
	return deleteOwned(k.actionGuard, r, func(r kube4.ResourceList) (*kube4.Result, []error) { return k.Interface.Delete(r, p) })
}

func (k v4Kube) Get(r kube4.ResourceList, related bool) (m map[string][]runtime.Object, err error) {
	err = k.call(func() error { m, err = k.Interface.Get(r, related); return err })
	return m, err
}

func (k v4Kube) Build(reader io.Reader, validate bool) (l kube4.ResourceList, err error) {
	err = k.call(func() error { l, err = k.Interface.Build(reader, validate); return err })
	return l, err
}

func (k v4Kube) BuildTable(reader io.Reader, validate bool) (l kube4.ResourceList, err error) {
	err = k.call(func() error { l, err = k.Interface.BuildTable(reader, validate); return err })
	return l, err
}

func (k v4Kube) IsReachable() error { return k.call(k.Interface.IsReachable) }

func (k v4Kube) GetPodList(namespace string, o metav1.ListOptions) (l *v1.PodList, err error) {
	err = k.call(func() error { l, err = k.Interface.GetPodList(namespace, o); return err })
	return l, err
}

func (k v4Kube) OutputContainerLogsForPodList(l *v1.PodList, namespace string, w func(namespace, pod, container string) io.Writer) error {
	return k.call(func() error { return k.Interface.OutputContainerLogsForPodList(l, namespace, w) })
}

func (k v4Kube) GetWaiter(ws kube4.WaitStrategy) (kube4.Waiter, error) {
	return k.GetWaiterWithOptions(ws)
}

// GetWaiterWithOptions hands out a waiter whose every wait ends with the action's context.
func (k v4Kube) GetWaiterWithOptions(ws kube4.WaitStrategy, o ...kube4.WaitOption) (kube4.Waiter, error) {
	o = append(o, kube4.WithWaitContext(k.ctx), kube4.WithWaitMethodContext(k.ctx),
		kube4.WithWaitWithJobsMethodContext(k.ctx), kube4.WithWatchUntilReadyMethodContext(k.ctx),
		kube4.WithWaitForDeleteMethodContext(k.ctx))
	var w kube4.Waiter
	err := k.call(func() (err error) {
		if c, ok := k.Interface.(kube4.InterfaceWaitOptions); ok {
			w, err = c.GetWaiterWithOptions(ws, o...)
			return err
		}
		w, err = k.Interface.GetWaiter(ws)
		return err
	})
	if err != nil {
		return nil, err
	}
	return v4Waiter{w: w, k: k}, nil
}

// v4Waiter is a waiter behind the fence that tells the gate while it waits.
type v4Waiter struct {
	w kube4.Waiter
	k v4Kube
}

func (w v4Waiter) Wait(r kube4.ResourceList, timeout time.Duration) error {
	return w.resources(r, timeout, w.w.Wait)
}

func (w v4Waiter) WaitWithJobs(r kube4.ResourceList, timeout time.Duration) error {
	return w.resources(r, timeout, w.w.WaitWithJobs)
}

// resources is a wait for the release's resources, logged as Helm v3 logs it.
func (w v4Waiter) resources(r kube4.ResourceList, timeout time.Duration, fn func(kube4.ResourceList, time.Duration) error) error {
	start := time.Now()
	w.k.log("beginning wait for %d resources with timeout of %v", len(r), timeout)
	err := w.k.waiting(func() error { return fn(r, timeout) })
	if err == nil {
		w.k.log("wait for resources succeeded within %s", time.Since(start).Round(time.Millisecond))
	}
	return err
}

func (w v4Waiter) WaitForDelete(r kube4.ResourceList, timeout time.Duration) error {
	return w.k.waiting(func() error { return w.w.WaitForDelete(r, timeout) })
}

// WatchUntilReady is a hook's wait: logged with the hook's kind and name, as Helm v3 does.
func (w v4Waiter) WatchUntilReady(r kube4.ResourceList, timeout time.Duration) error {
	for _, info := range r {
		if info != nil && info.Mapping != nil {
			w.k.log("Watching for changes to %s %s with timeout of %v", info.Mapping.GroupVersionKind.Kind, info.Name, timeout)
			break
		}
	}
	return w.k.waiting(func() error { return w.w.WatchUntilReady(r, timeout) })
}
