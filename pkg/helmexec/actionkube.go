package helmexec

import (
	"errors"
	"fmt"
	"io"
	"time"

	"helm.sh/helm/v3/pkg/kube"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/resource"
)

// guard stands around an action's cluster calls, on either engine: its fence refuses
// every call once the action ended, the API gate is told around the apply's calls and
// the wait gate around its waits (slots.go).
type guard struct {
	f    *Fence
	gate WaitGate
	api  APIGate
}

// call runs fn behind the fence (none: at once).
func (g guard) call(fn func() error) error {
	if g.f == nil {
		return fn()
	}
	if err := g.f.enter(); err != nil {
		return err
	}
	defer g.f.leave()
	return fn()
}

// calling is call of one of the apply's calls, between the API gate's Calling and Returned.
func (g guard) calling(fn func() error) error {
	if g.api != nil {
		g.api.Calling()
		defer g.api.Returned()
	}
	return g.call(fn)
}

// waiting is call of one wait, between the wait gate's Waiting and Working.
func (g guard) waiting(fn func() error) error {
	return g.call(func() error {
		if g.gate != nil {
			g.gate.Waiting()
			defer g.gate.Working()
		}
		return fn()
	})
}

// actionKube is a v3 action's kube client: guarded, deleting only what the release owns
// (owned.go), and on an uninstall creating hooks (and watching them) only when they may
// run (uninstallhooks.go). It implements the optional interfaces Helm asserts, passing
// them through when the client underneath has them.
type actionKube struct {
	kube.Interface
	guard
	owner *owner
	live  liveGetter
	log   func(string, ...any)
	hooks *hookGate
}

// actionClient wraps kc as o asks (kc itself when o asks nothing of it).
func (o *configOptions) actionClient(kc kube.Interface) kube.Interface {
	if o.fence == nil && o.owner == nil && o.hooks == nil {
		return kc
	}
	k := actionKube{Interface: kc, guard: guard{f: o.fence}, owner: o.owner, live: o.liveGetter(), log: o.log, hooks: o.hooks}
	if o.fence != nil {
		k.gate, k.api = o.gate, o.api
	}
	return k
}

// hooksMayRun refuses an uninstall's hook before its record is judged or when its hooks
// are not run.
func (k actionKube) hooksMayRun() error {
	if k.hooks == nil {
		return nil
	}
	p := k.hooks.decided()
	switch {
	case p == nil:
		return errors.New("uninstall: no hook is created before its record is judged")
	case p.run == hooksAsCaller:
		return nil
	}
	return fmt.Errorf("uninstall: delete hooks are not run: %s", p.why)
}

func (k actionKube) Create(r kube.ResourceList) (res *kube.Result, err error) {
	err = k.calling(func() error {
		if k.owner != nil {
			k.owner.created.add(r) // its hooks may be deleted (judgeHook)
		}
		if err := k.hooksMayRun(); err != nil {
			return err
		}
		res, err = k.Interface.Create(r)
		return err
	})
	return res, err
}

// Update answers a refusal with an empty Result, as Helm's client answers every error:
// Helm's upgrade reads the Result of a failed Update.
func (k actionKube) Update(original, target kube.ResourceList, force bool) (res *kube.Result, err error) {
	err = k.calling(func() error {
		if k.owner != nil {
			original = k.owner.deletable(original, target, k.live, k.log)
		}
		res, err = k.Interface.Update(original, target, force)
		return err
	})
	if res == nil {
		res = &kube.Result{}
	}
	return res, err
}

func (k actionKube) Delete(r kube.ResourceList) (*kube.Result, []error) {
	return deleteOwned(k.guard, k.owner, k.live, k.log, r, k.Interface.Delete)
}

// DeleteWithPropagationPolicy is kube.InterfaceDeletionPropagation; without it underneath,
// Helm would call Delete.
func (k actionKube) DeleteWithPropagationPolicy(r kube.ResourceList, policy metav1.DeletionPropagation) (*kube.Result, []error) {
	if dp, ok := k.Interface.(kube.InterfaceDeletionPropagation); ok {
		return deleteOwned(k.guard, k.owner, k.live, k.log, r, func(r kube.ResourceList) (*kube.Result, []error) {
			return dp.DeleteWithPropagationPolicy(r, policy)
		})
	}
	return k.Delete(r)
}

// deleteOwned deletes with del, behind g, what of r the release owns (o nil: all of r);
// either engine's kube client.
func deleteOwned[L ~[]*resource.Info, R any](g guard, o *owner, live liveGetter, log func(string, ...any), r L, del func(L) (*R, []error)) (res *R, errs []error) {
	if err := g.calling(func() error {
		if o != nil {
			if r = L(o.ownedOf(r, true, live, log)); len(r) == 0 {
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
