package helmexec

import (
	"errors"
	"net/http"
	"sync"

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

// Orphans counts the actions whose Helm work outlived them (fenced off, it changes nothing).
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
