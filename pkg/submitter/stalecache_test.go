package submitter

import (
	"errors"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// frozen is a revision cache that stopped at one moment: what submit's informer shows while
// its watch lags behind the API server (seen in e2e under load: a client's second request,
// sent after the first one's 201, found the cache without the first's revision).
type frozen map[string][]any

func (f frozen) ByIndex(_, value string) ([]any, error) { return f[value], nil }

// lagging freezes the store's cache as it is now.
func (e *env) lagging() {
	e.t.Helper()
	snap := frozen{}
	for _, s := range e.secrets() {
		k := "ns/" + s.Labels[release.LabelName]
		snap[k] = append(snap[k], &s)
	}
	e.store.Revisions = snap
}

// A revision computed from a lagging cache is a guess: when the API server says it is
// taken, the request is answered from a live read, as if the cache had been current, not
// refused because another request "reserved this revision first".
func TestRequestsAfterARevisionTheCacheHasNotSeen(t *testing.T) {
	t.Run("upgrade with supersede", func(t *testing.T) {
		e := newEnv(t)
		e.svc.Heartbeat = &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: e.svc.Clock}
		e.svc.Supersede = SupersedeOptions{Poll: time.Millisecond}
		e.deploy("web", 1, helmrelease.StatusDeployed)
		e.lagging()
		if _, err := e.svc.Submit(ctx(t), release.ActionUpgrade, install("web"), nil); err != nil {
			t.Fatal(err)
		}
		acc, err := e.svc.Submit(ctx(t), release.ActionUpgrade, superseding("web"), &auth.User{Name: "alice"})
		if err != nil || acc.Revision != 3 {
			t.Fatalf("supersede after revision 2 was accepted = %+v, %v; want revision 3", acc, err)
		}
		if st, _ := e.status("web", 2); st != helmrelease.StatusFailed {
			t.Errorf("revision 2: %s, want failed (superseded)", st)
		}
	})
	t.Run("upgrade while one is pending", func(t *testing.T) {
		e := newEnv(t)
		e.deploy("web", 1, helmrelease.StatusDeployed)
		e.lagging()
		if _, err := e.svc.Submit(ctx(t), release.ActionUpgrade, install("web"), nil); err != nil {
			t.Fatal(err)
		}
		_, err := e.svc.Submit(ctx(t), release.ActionUpgrade, install("web"), nil)
		var pending *release.PendingError
		if !errors.As(err, &pending) || pending.Revision != 2 {
			t.Fatalf("second upgrade = %v, want revision 2 pending", err)
		}
	})
	t.Run("rollback while one is pending", func(t *testing.T) {
		e := newEnv(t)
		e.deploy("web", 1, helmrelease.StatusDeployed)
		e.lagging()
		if _, err := e.svc.Submit(ctx(t), release.ActionUpgrade, install("web"), nil); err != nil {
			t.Fatal(err)
		}
		_, err := e.svc.Rollback(ctx(t), api.RollbackRequest{Namespace: "ns", Name: "web", Version: 1}, nil)
		var pending *release.PendingError
		if !errors.As(err, &pending) || pending.Revision != 2 {
			t.Fatalf("rollback = %v, want revision 2 pending", err)
		}
	})
}
