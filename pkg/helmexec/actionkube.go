package helmexec

import (
	"errors"
	"fmt"
	"io"
	"time"

	"helm.sh/helm/v3/pkg/kube"
	helmrelease "helm.sh/helm/v3/pkg/release"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/resource"

	"github.com/async-helm/async-helm/pkg/progress"
)

// actionGuard stands around an action's cluster calls, on either engine's kube client:
//   - its fence refuses every call once the action ended; the API gate is told around the
//     apply's calls and the wait gate around its waits (slots.go);
//   - it deletes only what the release owns (owned.go);
//   - on an uninstall, it creates hooks only when they may run (uninstallhooks.go);
//   - it logs each create and update in the lines progress.Phases reads, which tell a
//     hook's creates from the release's (Helm logs both as "creating N resource(s)", and a
//     hook of a kind Helm does not watch is followed by no other line).
type actionGuard struct {
	f     *Fence
	gate  WaitGate
	api   APIGate
	owner *owner
	live  liveGetter
	log   func(string, ...any)
	hooks *hookGate
}

// call runs fn behind the fence (none: at once).
func (a actionGuard) call(fn func() error) error {
	if a.f == nil {
		return fn()
	}
	if err := a.f.enter(); err != nil {
		return err
	}
	defer a.f.leave()
	return fn()
}

// calling is call of one of the apply's calls, between the API gate's Calling and Returned.
func (a actionGuard) calling(fn func() error) error {
	if a.api != nil {
		a.api.Calling()
		defer a.api.Returned()
	}
	return a.call(fn)
}

// waiting is call of one wait, between the wait gate's Waiting and Working.
func (a actionGuard) waiting(fn func() error) error {
	return a.call(func() error {
		if a.gate != nil {
			a.gate.Waiting()
			defer a.gate.Working()
		}
		return fn()
	})
}

func (o *configOptions) actionGuard() actionGuard {
	return actionGuard{f: o.fence, gate: o.gate, api: o.api, owner: o.owner, live: o.liveGetter(), log: o.log, hooks: o.hooks}
}

// actionKube is a v3 action's kube client. It implements the optional interfaces Helm
// asserts, passing them through when the client underneath has them.
type actionKube struct {
	kube.Interface
	actionGuard
}

// actionClient wraps kc as o asks (kc itself when o asks nothing of it).
func (o *configOptions) actionClient(kc kube.Interface) kube.Interface {
	if o.fence == nil && o.owner == nil && o.hooks == nil {
		return kc
	}
	k := actionKube{Interface: kc, actionGuard: o.actionGuard()}
	if o.fence == nil { // the gates are told only behind a fence
		k.gate, k.api = nil, nil
	}
	return k
}

// hooksMayRun refuses an uninstall's hook before its record is judged or when its hooks
// are not run.
func (a actionGuard) hooksMayRun() error {
	if a.hooks == nil {
		return nil
	}
	p := a.hooks.decided()
	switch {
	case p == nil:
		return errors.New("uninstall: no hook is created before its record is judged")
	case p.run == hooksAsCaller:
		return nil
	}
	return fmt.Errorf("uninstall: delete hooks are not run: %s", p.why)
}

func (a actionGuard) create(r []*resource.Info, create func() error) error {
	return a.calling(func() error {
		if a.owner != nil {
			a.owner.created.add(r) // its hooks may be deleted (judgeHook)
		}
		if err := a.hooksMayRun(); err != nil {
			return err
		}
		if isHook(r) {
			a.log(progress.LogCreateHook, len(r))
		} else {
			a.log(progress.LogCreateRelease, len(r), progress.WorkloadsOf(r))
		}
		return create()
	})
}

// update gives update the part of original it may delete.
func (a actionGuard) update(original, target []*resource.Info, update func(original []*resource.Info) error) error {
	return a.calling(func() error {
		if a.owner != nil {
			original = a.owner.deletable(original, target, a.live, a.log)
		}
		a.log(progress.LogUpdateRelease, len(target), progress.WorkloadsOf(target))
		return update(original)
	})
}

// isHook: Helm creates each hook on its own, and a hook's manifest carries the annotation.
func isHook(resources []*resource.Info) bool {
	for _, info := range resources {
		if info == nil || info.Object == nil {
			continue
		}
		if m, err := meta.Accessor(info.Object); err == nil {
			if _, ok := m.GetAnnotations()[helmrelease.HookAnnotation]; ok {
				return true
			}
		}
	}
	return false
}

func (k actionKube) Create(r kube.ResourceList) (res *kube.Result, err error) {
	err = k.create(r, func() (err error) { res, err = k.Interface.Create(r); return err })
	return res, err
}

// Update answers a refusal with an empty Result, as Helm's client answers every error:
// Helm's upgrade reads the Result of a failed Update.
func (k actionKube) Update(original, target kube.ResourceList, force bool) (res *kube.Result, err error) {
	err = k.update(original, target, func(original []*resource.Info) (err error) {
		res, err = k.Interface.Update(original, target, force)
		return err
	})
	if res == nil {
		res = &kube.Result{}
	}
	return res, err
}

func (k actionKube) Delete(r kube.ResourceList) (*kube.Result, []error) {
	return deleteOwned(k.actionGuard, r, k.Interface.Delete)
}

// DeleteWithPropagationPolicy is kube.InterfaceDeletionPropagation; without it underneath,
// Helm would call Delete.
func (k actionKube) DeleteWithPropagationPolicy(r kube.ResourceList, policy metav1.DeletionPropagation) (*kube.Result, []error) {
	if dp, ok := k.Interface.(kube.InterfaceDeletionPropagation); ok {
		return deleteOwned(k.actionGuard, r, func(r kube.ResourceList) (*kube.Result, []error) {
			return dp.DeleteWithPropagationPolicy(r, policy)
		})
	}
	return k.Delete(r)
}

// deleteOwned deletes with del, behind a, what of r the release owns (no owner:
// all of r); either engine's kube client.
func deleteOwned[L ~[]*resource.Info, R any](a actionGuard, r L, del func(L) (*R, []error)) (res *R, errs []error) {
	if err := a.calling(func() error {
		if a.owner != nil {
			if r = L(a.owner.ownedOf(r, true, a.live, a.log)); len(r) == 0 {
				res = new(R)
				return nil
			}
		}
		res, errs = del(r)
		return nil
	}); err != nil {
		return nil, []error{err}
	}
	return res, errs
}

func (k actionKube) Wait(r kube.ResourceList, timeout time.Duration) error {
	return k.waiting(func() error { return k.Interface.Wait(r, timeout) })
}

func (k actionKube) WaitWithJobs(r kube.ResourceList, timeout time.Duration) error {
	return k.waiting(func() error { return k.Interface.WaitWithJobs(r, timeout) })
}

func (k actionKube) WatchUntilReady(r kube.ResourceList, timeout time.Duration) error {
	return k.waiting(func() error {
		if err := k.hooksMayRun(); err != nil {
			return err
		}
		return k.Interface.WatchUntilReady(r, timeout)
	})
}

func (k actionKube) WaitAndGetCompletedPodPhase(name string, timeout time.Duration) (p v1.PodPhase, err error) {
	err = k.waiting(func() error { p, err = k.Interface.WaitAndGetCompletedPodPhase(name, timeout); return err })
	return p, err
}

// WaitForDelete is kube.InterfaceExt; without it underneath, Helm would skip the wait.
func (k actionKube) WaitForDelete(r kube.ResourceList, timeout time.Duration) error {
	ext, ok := k.Interface.(kube.InterfaceExt)
	if !ok {
		return nil
	}
	return k.waiting(func() error { return ext.WaitForDelete(r, timeout) })
}

func (k actionKube) Build(reader io.Reader, validate bool) (l kube.ResourceList, err error) {
	err = k.call(func() error { l, err = k.Interface.Build(reader, validate); return err })
	return l, err
}

func (k actionKube) IsReachable() error { return k.call(k.Interface.IsReachable) }

// GetPodList is kube.InterfaceLogs (hook output logs).
func (k actionKube) GetPodList(namespace string, o metav1.ListOptions) (l *v1.PodList, err error) {
	lg, ok := k.Interface.(kube.InterfaceLogs)
	if !ok {
		return &v1.PodList{}, nil
	}
	err = k.call(func() error { l, err = lg.GetPodList(namespace, o); return err })
	return l, err
}

// OutputContainerLogsForPodList is kube.InterfaceLogs (hook output logs).
func (k actionKube) OutputContainerLogsForPodList(l *v1.PodList, namespace string, w func(namespace, pod, container string) io.Writer) error {
	lg, ok := k.Interface.(kube.InterfaceLogs)
	if !ok {
		return nil
	}
	return k.call(func() error { return lg.OutputContainerLogsForPodList(l, namespace, w) })
}
