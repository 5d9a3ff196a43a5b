package reader

import (
	"context"
	"errors"
	"runtime"
	"testing"
	"time"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/release"
)

// gatedAuthz holds each review it denies until open is closed (a review's round trip),
// telling started of each.
type gatedAuthz struct {
	authz
	open    chan struct{}
	started chan struct{}
}

func (g *gatedAuthz) Allowed(ctx context.Context, u *auth.User, n auth.Need) (bool, error) {
	ok, err := g.authz.Allowed(ctx, u, n)
	if err == nil && !ok {
		g.started <- struct{}{}
		<-g.open
	}
	return ok, err
}

func (g *gatedAuthz) Check(ctx context.Context, u *auth.User, needs ...auth.Need) error {
	for _, n := range needs {
		if ok, err := g.Allowed(ctx, u, n); err != nil || !ok {
			return errors.Join(err, auth.ErrForbidden)
		}
	}
	return nil
}

// A read of a namespace its caller may not read is refused before it takes a read slot:
// another caller's denied reads naming team-b, however many and however slow their
// reviews, hold none of team-b's slots, so team-b's own reader does not wait behind them.
func TestAReadIsAuthorizedBeforeItTakesASlot(t *testing.T) {
	a := &gatedAuthz{authz: authz{may: map[string]map[string]bool{"bob": {"team-b": true}}},
		open: make(chan struct{}), started: make(chan struct{}, 64)}
	s := &Service{Secrets: &release.Store{Client: fakekube.New(fakekube.NewClock(time.Now())).Typed()}, Index: metaIndex{}, Authorizer: a}
	const denied = 3 * readSlots
	errs := make(chan error, denied)
	for i := range denied {
		mallory := &auth.User{Name: "mallory"} // no right in team-b
		go func() {
			var err error
			switch i % 3 {
			case 0:
				_, err = s.Latest(context.Background(), mallory, "team-b", "web")
			case 1:
				_, err = s.History(context.Background(), mallory, "team-b", "web")
			default:
				_, err = s.List(context.Background(), mallory, "team-b", false)
			}
			errs <- err
		}()
	}
	for range readSlots - 1 { // as many as may hold team-b's slots
		<-a.started
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := s.List(ctx, &auth.User{Name: "bob"}, "team-b", true); err != nil {
		t.Errorf("bob's list of his own team-b while mallory's reads of it are reviewed: %v", err)
	}
	close(a.open)
	for range denied {
		if err := <-errs; !errors.Is(err, auth.ErrForbidden) {
			t.Errorf("mallory's read of team-b: %v, want forbidden", err)
		}
	}
}

// The ServiceAccounts of one namespace are one caller of the read slots: however many a
// namespace editor makes, their all-namespaces lists hold at most all but one slot.
func TestANamespacesServiceAccountsAreOneReadCaller(t *testing.T) {
	idx := &heldIndex{held: "", release: make(chan struct{})}
	s := &Service{Secrets: &release.Store{Client: fakekube.New(fakekube.NewClock(time.Now())).Typed()}, Index: idx}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan struct{}, readSlots)
	for i := range readSlots {
		sa := &auth.User{Name: "system:serviceaccount:team-m:sa-" + string(rune('a'+i))}
		go func() {
			_, _ = s.List(ctx, sa, "", true)
			done <- struct{}{}
		}()
	}
	for queued := 0; int(idx.inFlight.Load())+queued < readSlots; runtime.Gosched() {
		if ctx.Err() != nil {
			t.Fatal("the ServiceAccounts' lists neither read nor waited")
		}
		queued = 0
		if s.slots != nil {
			for _, st := range s.slots.Stats() {
				queued += st.Queued
			}
		}
	}
	close(idx.release)
	for range readSlots {
		<-done
	}
	if n := idx.maxSeen.Load(); n > readSlots-1 {
		t.Errorf("%d lists of one namespace's ServiceAccounts read at once, want at most %d", n, readSlots-1)
	}
}
