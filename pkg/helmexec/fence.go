package helmexec

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"helm.sh/helm/v3/pkg/kube"
	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/release/storage"
)

// ErrActionEnded is a call refused because its action ended for the executor (deadline,
// cancel, lost lease, shutdown, render bound): Helm's background work must not go on.
var ErrActionEnded = errors.New("the action ended; Helm's background work is fenced off")

// Fence closes one action off from the cluster when the action ends: its storage is sealed
// and its kube client refuses every call. Helm's install and upgrade go on in a goroutine
// after their context ends; the fence makes sure such leftovers can change nothing, and
// counts them as orphans until they return.
type Fence struct {
	// Orphans, when set, counts this action while it is an orphan.
	Orphans *Orphans

	seal storage.SealableDriver

	mu       sync.Mutex
	ended    bool
	running  bool // the goroutine running Helm's action has not returned
	inflight int  // cluster calls under way
	orphan   bool
}

// End closes the fence: call it before cancelling the action's context, so that Helm's
// own failure write, racing the cancel, is refused too.
func (f *Fence) End() {
	f.seal.Seal()
	f.update(func() { f.ended = true })
}

// Ended reports whether End was called.
func (f *Fence) Ended() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.ended
}

// update changes the state under the lock and moves the orphan counts accordingly.
func (f *Fence) update(change func()) {
	f.mu.Lock()
	change()
	next := f.ended && (f.running || f.inflight > 0)
	prev := f.orphan
	f.orphan = next
	f.mu.Unlock()
	if prev != next && f.Orphans != nil {
		f.Orphans.add(next)
	}
}

func (f *Fence) started()  { f.update(func() { f.running = true }) }
func (f *Fence) returned() { f.update(func() { f.running = false }) }

// enter admits a cluster call; the caller must call leave when it returns.
func (f *Fence) enter() error {
	var err error
	f.update(func() {
		if f.ended {
			err = ErrActionEnded
			return
		}
		f.inflight++
	})
	return err
}

func (f *Fence) leave() { f.update(func() { f.inflight-- }) }

// storage is the sealed driver around d.
func (f *Fence) storage(d storage.Driver) storage.Driver {
	f.seal.Driver = d
	return &f.seal
}

// Orphans counts the actions whose Helm work outlived them (fenced off: it can change
// nothing).
type Orphans struct {
	mu sync.Mutex
	n  int
	// OnChange, when set, is told the count after every change (logs, metrics).
	OnChange func(orphans int)
}

// Count is how many orphans there are now.
func (o *Orphans) Count() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.n
}

// add counts one more orphan (up) or one fewer.
func (o *Orphans) add(up bool) {
	o.mu.Lock()
	if up {
		o.n++
	} else {
		o.n--
	}
	n := o.n
	o.mu.Unlock()
	if o.OnChange != nil {
		o.OnChange(n)
	}
}

// fencedKube is an action's kube client behind its fence. It implements the optional
// interfaces Helm asserts, passing them through when the client underneath has them.
type fencedKube struct {
	kube.Interface
	f *Fence
}

func (k fencedKube) call(fn func() error) error {
	if err := k.f.enter(); err != nil {
		return err
	}
	defer k.f.leave()
	return fn()
}

func (k fencedKube) Create(r kube.ResourceList) (res *kube.Result, err error) {
	err = k.call(func() error { res, err = k.Interface.Create(r); return err })
	return res, err
}

// Update answers a refusal with an empty Result, as Helm's client answers every error:
// Helm's upgrade reads the Result of a failed Update.
func (k fencedKube) Update(original, target kube.ResourceList, force bool) (res *kube.Result, err error) {
	if err = k.call(func() error { res, err = k.Interface.Update(original, target, force); return err }); res == nil {
		res = &kube.Result{}
	}
	return res, err
}

func (k fencedKube) Delete(r kube.ResourceList) (res *kube.Result, errs []error) {
	if err := k.call(func() error { res, errs = k.Interface.Delete(r); return nil }); err != nil {
		return nil, []error{err}
	}
	return res, errs
}

func (k fencedKube) Wait(r kube.ResourceList, timeout time.Duration) error {
	return k.call(func() error { return k.Interface.Wait(r, timeout) })
}

func (k fencedKube) WaitWithJobs(r kube.ResourceList, timeout time.Duration) error {
	return k.call(func() error { return k.Interface.WaitWithJobs(r, timeout) })
}

func (k fencedKube) WatchUntilReady(r kube.ResourceList, timeout time.Duration) error {
	return k.call(func() error { return k.Interface.WatchUntilReady(r, timeout) })
}

func (k fencedKube) WaitAndGetCompletedPodPhase(name string, timeout time.Duration) (p v1.PodPhase, err error) {
	err = k.call(func() error { p, err = k.Interface.WaitAndGetCompletedPodPhase(name, timeout); return err })
	return p, err
}

func (k fencedKube) Build(reader io.Reader, validate bool) (l kube.ResourceList, err error) {
	err = k.call(func() error { l, err = k.Interface.Build(reader, validate); return err })
	return l, err
}

func (k fencedKube) IsReachable() error {
	return k.call(k.Interface.IsReachable)
}

// WaitForDelete is kube.InterfaceExt; without it underneath, Helm would skip the wait.
func (k fencedKube) WaitForDelete(r kube.ResourceList, timeout time.Duration) error {
	ext, ok := k.Interface.(kube.InterfaceExt)
	if !ok {
		return nil
	}
	return k.call(func() error { return ext.WaitForDelete(r, timeout) })
}

// DeleteWithPropagationPolicy is kube.InterfaceDeletionPropagation; without it underneath,
// Helm would call Delete.
func (k fencedKube) DeleteWithPropagationPolicy(r kube.ResourceList, policy metav1.DeletionPropagation) (res *kube.Result, errs []error) {
	dp, ok := k.Interface.(kube.InterfaceDeletionPropagation)
	if !ok {
		return k.Delete(r)
	}
	if err := k.call(func() error { res, errs = dp.DeleteWithPropagationPolicy(r, policy); return nil }); err != nil {
		return nil, []error{err}
	}
	return res, errs
}

// GetPodList is kube.InterfaceLogs (hook output logs).
func (k fencedKube) GetPodList(namespace string, o metav1.ListOptions) (l *v1.PodList, err error) {
	lg, ok := k.Interface.(kube.InterfaceLogs)
	if !ok {
		return &v1.PodList{}, nil
	}
	err = k.call(func() error { l, err = lg.GetPodList(namespace, o); return err })
	return l, err
}

// OutputContainerLogsForPodList is kube.InterfaceLogs (hook output logs).
func (k fencedKube) OutputContainerLogsForPodList(l *v1.PodList, namespace string, w func(namespace, pod, container string) io.Writer) error {
	lg, ok := k.Interface.(kube.InterfaceLogs)
	if !ok {
		return nil
	}
	return k.call(func() error { return lg.OutputContainerLogsForPodList(l, namespace, w) })
}

func (f *Fence) String() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return fmt.Sprintf("fence{ended=%v running=%v inflight=%d}", f.ended, f.running, f.inflight)
}

// FenceOf is the fence opts carry (nil without WithFence): fakes of Helm in tests honour it.
func FenceOf(opts ...Option) *Fence { return optionsOf(opts).fence }

// guardREST fences every call made through cfg, the action's identity: the template
// `lookup` calls of a render too, which reach the API server through the action's REST
// config rather than its kube client. A render's lookups after its action ended fail at
// once.
func (f *Fence) guardREST(cfg *rest.Config) {
	if f == nil {
		return
	}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return fencedTransport{next: rt, f: f} })
}

type fencedTransport struct {
	next http.RoundTripper
	f    *Fence
}

func (t fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := t.f.enter(); err != nil {
		return nil, err
	}
	defer t.f.leave()
	return t.next.RoundTrip(req)
}
