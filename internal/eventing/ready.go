package eventing

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// waitReady waits until the named objects' Ready conditions are True, through one list and
// watch of gvr in the namespace (of the one object when there is one name) instead of polls.
// It returns the Ready objects by name; on timeout the error names the first object not
// Ready and carries its last conditions (what Knative says is missing).
func (w *Wiring) waitReady(ctx context.Context, gvr schema.GroupVersionResource, deadline time.Time, names ...string) (map[string]*unstructured.Unstructured, error) {
	ready := map[string]*unstructured.Unstructured{}
	if len(names) == 0 {
		return ready, nil
	}
	if time.Now().After(deadline) { // one look, as a poll would have had
		return w.getReady(ctx, gvr, names)
	}
	last := map[string][]any{} // the last conditions seen, by name
	wanted := map[string]bool{}
	for _, n := range names {
		wanted[n] = true
	}
	lw := w.listWatch(gvr, names)
	done := func(ev watch.Event) (bool, error) {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok || !wanted[u.GetName()] {
			return false, nil
		}
		if ev.Type == watch.Deleted {
			delete(ready, u.GetName())
			delete(last, u.GetName())
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		last[u.GetName()] = conds
		if isReady(conds) {
			ready[u.GetName()] = u
		} else {
			delete(ready, u.GetName())
		}
		return len(ready) == len(wanted), nil
	}
	wctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	_, err := watchtools.UntilWithSync(wctx, lw, &unstructured.Unstructured{}, nil, done)
	if err == nil {
		return ready, nil
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if wctx.Err() == nil { // not the deadline
		return nil, err
	}
	for _, n := range names {
		if ready[n] == nil {
			msg := fmt.Errorf("%s %s/%s not Ready: %s", gvr.Resource, w.ns, n, notReady(last[n]))
			if lerr := lw.lastErr(); lerr != nil {
				return nil, fmt.Errorf("%w (last list/watch error: %v)", msg, lerr)
			}
			return nil, msg
		}
	}
	return nil, err
}

// getReady is waitReady's single look once the deadline has passed.
func (w *Wiring) getReady(ctx context.Context, gvr schema.GroupVersionResource, names []string) (map[string]*unstructured.Unstructured, error) {
	ready := map[string]*unstructured.Unstructured{}
	for _, n := range names {
		u, err := w.dyn.Resource(gvr).Namespace(w.ns).Get(ctx, n, metav1.GetOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
		var conds []any
		if err == nil {
			conds, _, _ = unstructured.NestedSlice(u.Object, "status", "conditions")
		}
		if !isReady(conds) {
			return nil, fmt.Errorf("%s %s/%s not Ready: %s", gvr.Resource, w.ns, n, notReady(conds))
		}
		ready[n] = u
	}
	return ready, nil
}

func isReady(conds []any) bool {
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["type"] == "Ready" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// errListWatch is a ListWatch that remembers its last error: the informer under
// UntilWithSync retries a failing list or watch quietly, and a timeout should say why.
type errListWatch struct {
	cache.ListWatch
	mu  sync.Mutex
	err error
}

func (l *errListWatch) lastErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *errListWatch) record(err error) {
	if err != nil && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded) {
		l.mu.Lock()
		l.err = err
		l.mu.Unlock()
	}
}

// listWatch lists and watches gvr in the namespace, only the object when there is one name.
func (w *Wiring) listWatch(gvr schema.GroupVersionResource, names []string) *errListWatch {
	sel := func(o *metav1.ListOptions) {
		if len(names) == 1 {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", names[0]).String()
		}
	}
	res := w.dyn.Resource(gvr).Namespace(w.ns)
	lw := &errListWatch{}
	lw.ListWithContextFunc = func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		sel(&o)
		l, err := res.List(ctx, o)
		lw.record(err)
		return l, err
	}
	lw.WatchFuncWithContext = func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		sel(&o)
		wi, err := res.Watch(ctx, o)
		lw.record(err)
		return wi, err
	}
	return lw
}
