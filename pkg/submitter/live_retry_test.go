package submitter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// Attacks on the live retry of a revision the cache guessed and the create found taken
// (withLiveRetry), by an editor of its own namespace: it writes any Secret there, with
// any name, labels and payload, whenever it likes.

// current is a revision cache that is never behind: every read lists the API server. What
// a request does with it is what it does "with a current cache".
type current struct{ e *env }

func (c current) ByIndex(_, value string) ([]any, error) {
	ns, name, _ := strings.Cut(value, "/")
	l, err := c.e.c.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: release.SelectorRelease(name)})
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(l.Items))
	for i := range l.Items {
		out = append(out, &l.Items[i])
	}
	return out, nil
}

// racing is the Store with something run just before the first Reserve: another request
// that takes the revision between this request's reads and its create.
type racing struct {
	*release.Store
	before func()
	fired  atomic.Bool
}

func (r *racing) Reserve(ctx context.Context, res release.Reservation) (*corev1.Secret, error) {
	if r.before != nil && r.fired.CompareAndSwap(false, true) {
		r.before()
	}
	return r.Store.Reserve(ctx, res)
}

// calls counts the API calls made since the index from of e.c.Actions().
func (e *env) calls(from int, verb, resource string) int {
	n := 0
	for _, a := range e.c.Actions()[from:] {
		if a.GetVerb() == verb && a.GetResource().Resource == resource {
			n++
		}
	}
	return n
}

// plant writes a Secret as the tenant would: any name, labels and payload.
func (e *env) plant(name string, labels map[string]string, payload []byte) {
	e.t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: labels},
		Type: "helm.sh/release.v1", Data: map[string][]byte{"release": payload}}
	if _, err := e.c.CoreV1().Secrets("ns").Create(ctx(e.t), sec, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// Attack 1: the tenant parks a Secret under the name of the next revision, without the
// release labels, so that neither the cache nor the live LIST sees it and every create of
// that revision is refused. The request retries once, not more: two creates, one live
// LIST, 409, nothing reserved, nothing cancelled.
func TestRetryAttackAnInvisibleSecretAtTheNextRevisionCostsOneRetry(t *testing.T) {
	for _, supersede := range []bool{false, true} {
		t.Run(fmt.Sprintf("supersede=%v", supersede), func(t *testing.T) {
			e := supersedeEnv(t) // 1 deployed, 2 queued (req-1)
			if !supersede {
				// Without supersede 2 must be final for an upgrade to reserve 3; with it,
				// the request supersedes 2 first.
				if _, err := e.store.MarkFailed(ctx(t), "ns", "web", 2, "failed by hand", release.KeepFailed); err != nil {
					t.Fatal(err)
				}
			}
			e.lagging()
			e.plant(release.SecretName("web", 3), map[string]string{"tenant": "was-here"}, []byte("junk"))
			before := len(e.c.Actions())
			req := install("web")
			req.Supersede = supersede
			_, err := e.svc.Submit(ctx(t), release.ActionUpgrade, req, nil)
			if !errors.Is(err, release.ErrConflict) {
				t.Fatalf("upgrade onto a taken revision 3: %v, want 409 conflict", err)
			}
			// Guessed from the cache: one retry. With supersede, 3 was read live (after
			// the pending 2): a race, not retried.
			want := 2
			if supersede {
				want = 1
			}
			if n := e.calls(before, "create", "secrets"); n != want {
				t.Errorf("%d creates of a revision, want %d", n, want)
			}
			if n := e.calls(before, "list", "secrets"); n > 2 {
				t.Errorf("%d LISTs of the release for one request, want at most 2", n)
			}
			if _, err := e.store.Get(ctx(t), "ns", "web", 4); !errors.Is(err, release.ErrNotFound) {
				t.Errorf("revision 4 reserved: %v", err)
			}
			if len(e.sender.sent) != 1 {
				t.Errorf("%d events sent, want only the setup's", len(e.sender.sent))
			}
		})
	}
}

// Attack 1b: many concurrent upgrades of one release behind a frozen cache. Each makes at
// most two creates; exactly one reserves revision 2, the others answer 409 (conflict or
// pending); no revision 3 appears.
func TestRetryAttackConcurrentRequestsEachRetryAtMostOnce(t *testing.T) {
	e := newEnv(t)
	var n atomic.Int32
	e.svc.NewID = func() string { return fmt.Sprintf("id-%d", n.Add(1)) }
	e.deploy("web", 1, helmrelease.StatusDeployed)
	e.lagging()
	const requests = 24
	before := len(e.c.Actions())
	won := winners(t, e.submitAtOnce(requests, release.ActionUpgrade, install("web")), release.ErrConflict, release.ErrPending)
	if won != 1 {
		t.Errorf("%d requests reserved a revision, want 1", won)
	}
	if c := e.calls(before, "create", "secrets"); c > 2*requests {
		t.Errorf("%d creates for %d requests: more than one retry each", c, requests)
	}
	if _, err := e.store.Get(ctx(t), "ns", "web", 3); !errors.Is(err, release.ErrNotFound) {
		t.Errorf("revision 3 exists: %v", err)
	}
}

// Attack 1c: the revision the cache guessed is taken by a hand-made Secret with the release
// labels, status pending-upgrade and a payload that does not decode. The retry reads it
// live: without supersede 409 naming it, with supersede revision 4; nothing panics.
func TestRetryAttackForgedPendingRevisionThatDoesNotDecode(t *testing.T) {
	for _, supersede := range []bool{false, true} {
		t.Run(fmt.Sprintf("supersede=%v", supersede), func(t *testing.T) {
			e := supersedeEnv(t)
			if _, err := e.store.MarkFailed(ctx(t), "ns", "web", 2, "failed by hand", release.KeepFailed); err != nil {
				t.Fatal(err)
			}
			e.lagging()
			e.plant(release.SecretName("web", 3), map[string]string{
				release.LabelOwner: release.OwnerHelm, release.LabelName: "web",
				release.LabelStatus: "pending-upgrade", release.LabelVersion: "3",
			}, []byte("H4sIAAAAAAAA/not gzip at all"))
			req := install("web")
			req.Supersede = supersede
			before := len(e.c.Actions())
			acc, err := e.svc.Submit(ctx(t), release.ActionUpgrade, req, nil)
			creates := e.calls(before, "create", "secrets")
			if !supersede {
				if creates != 1 {
					t.Errorf("%d creates, want 1 (the guess; the live read refuses)", creates)
				}
				var pending *release.PendingError
				if !errors.As(err, &pending) || pending.Revision != 3 {
					t.Fatalf("upgrade: %v, want 409 naming the pending revision 3", err)
				}
				return
			}
			// As with a current cache: the tenant's record is the one superseded and the
			// request reserves 4, with one retry.
			if err != nil || acc.Revision != 4 {
				t.Fatalf("supersede: %+v, %v; want revision 4", acc, err)
			}
			if creates != 2 {
				t.Errorf("%d creates, want 2 (the guess and the retry)", creates)
			}
		})
	}
}

// Attack 2 (the defect): a supersede request read the live history (revision 2 pending),
// cancelled 2, and lost revision 3 to another caller's upgrade, which got its 201. The
// revision the request lost was computed from the API server, not guessed from the cache:
// this is the race docs/design.md answers 409 ("Another request that reserves N+1 first,
// once N ended, gets it: this one answers 409"). The retry must not read the winner's
// revision as "the pending one" and cancel it too: with a cache, lagging or current, the
// answer must be the one without a cache.
func TestRetryAttackSupersedeDoesNotCancelTheRevisionThatWonTheRace(t *testing.T) {
	caches := map[string]func(e *env){
		"lagging cache": func(e *env) { e.lagging() },
		"current cache": func(e *env) { e.store.Revisions = current{e} },
		"no cache":      func(e *env) {},
	}
	actions := map[string]func(e *env) (*Accepted, error){
		"upgrade": func(e *env) (*Accepted, error) {
			return e.svc.Submit(ctx(e.t), release.ActionUpgrade, superseding("web"), &auth.User{Name: "alice"})
		},
		"rollback": func(e *env) (*Accepted, error) {
			return e.svc.Rollback(ctx(e.t), api.RollbackRequest{Namespace: "ns", Name: "web", Version: 1, Supersede: true}, &auth.User{Name: "alice"})
		},
	}
	for cname, cache := range caches {
		for aname, act := range actions {
			t.Run(cname+"/"+aname, func(t *testing.T) {
				e := supersedeEnv(t) // 1 deployed, 2 queued (req-1)
				cache(e)
				var other *Accepted
				var otherErr error
				e.svc.Store = &racing{Store: e.store, before: func() {
					// 2 is failed now (superseded): bob's upgrade reserves 3 first.
					other, otherErr = e.svc.Submit(ctx(t), release.ActionUpgrade, install("web"), &auth.User{Name: "bob"})
				}}
				acc, err := act(e)
				if otherErr != nil || other == nil || other.Revision != 3 {
					t.Fatalf("bob's upgrade: %+v, %v; want revision 3", other, otherErr)
				}
				if !errors.Is(err, release.ErrConflict) {
					t.Errorf("alice's supersede after bob took 3: %+v, %v; want 409 conflict", acc, err)
				}
				if st, desc := e.status("web", 3); st != helmrelease.StatusPendingUpgrade {
					t.Errorf("bob's revision 3 (201 answered): %s %q, want still pending-upgrade", st, desc)
				}
				if _, err := e.store.Get(ctx(t), "ns", "web", 4); !errors.Is(err, release.ErrNotFound) {
					t.Errorf("revision 4 reserved: %v", err)
				}
				// The cancel of 2 stands, naming alice's request.
				if st, desc := e.status("web", 2); st != helmrelease.StatusFailed || !strings.Contains(desc, "cancelled by alice: superseded by revision 3, request req-2") {
					t.Errorf("revision 2: %s %q", st, desc)
				}
			})
		}
	}
}

// Property: in the case the retry is for (the cache lags: revision 2 was accepted but the
// cache has not seen it), a supersede cancels exactly the one pending revision, names the
// revision and request that replaced it, and reserves that revision once.
func TestRetryAfterALaggingCacheCancelsOneRevisionAndNamesTheRequest(t *testing.T) {
	e := newEnv(t)
	e.svc.Heartbeat = &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: e.svc.Clock}
	e.svc.Supersede = SupersedeOptions{Poll: time.Millisecond}
	var n atomic.Int32
	e.svc.NewID = func() string { return fmt.Sprintf("req-%d", n.Add(1)) }
	e.deploy("web", 1, helmrelease.StatusDeployed)
	e.lagging() // the cache never sees revision 2
	if _, err := e.svc.Submit(ctx(t), release.ActionUpgrade, install("web"), nil); err != nil {
		t.Fatal(err)
	}
	before := len(e.c.Actions())
	acc, err := e.svc.Submit(ctx(t), release.ActionUpgrade, superseding("web"), &auth.User{Name: "alice"})
	if err != nil || acc.Revision != 3 {
		t.Fatalf("supersede: %+v, %v; want revision 3", acc, err)
	}
	if c := e.calls(before, "create", "secrets"); c != 2 {
		t.Errorf("%d creates, want 2 (the guess and the retry)", c)
	}
	want := fmt.Sprintf("cancelled by alice: superseded by revision 3, request %s", acc.RequestID)
	if st, desc := e.status("web", 2); st != helmrelease.StatusFailed || !strings.Contains(desc, want) {
		t.Errorf("revision 2: %s %q, want failed %q", st, desc, want)
	}
	if st, _ := e.status("web", 3); st != helmrelease.StatusPendingUpgrade {
		t.Errorf("revision 3: %s", st)
	}
	if _, err := e.store.Get(ctx(t), "ns", "web", 4); !errors.Is(err, release.ErrNotFound) {
		t.Errorf("revision 4 reserved: %v", err)
	}
}

// Property: a reservation that was written is never followed by a retry. A send that
// fails after the create takes the reservation back and answers 503, with one create.
func TestRetryNeverFollowsAWrittenReservation(t *testing.T) {
	e := newEnv(t)
	e.deploy("web", 1, helmrelease.StatusDeployed)
	e.lagging()
	e.sender.err = errors.New("broker down")
	before := len(e.c.Actions())
	_, err := e.svc.Submit(ctx(t), release.ActionUpgrade, install("web"), nil)
	if !errors.Is(err, ErrNotAccepted) {
		t.Fatalf("upgrade with the broker down: %v, want 503", err)
	}
	if c := e.calls(before, "create", "secrets"); c != 1 {
		t.Errorf("%d creates, want 1", c)
	}
	if _, err := e.store.Get(ctx(t), "ns", "web", 2); !errors.Is(err, release.ErrNotFound) {
		t.Errorf("revision 2 left behind: %v", err)
	}
}
