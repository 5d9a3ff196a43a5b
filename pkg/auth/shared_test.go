package auth

import (
	"context"
	"crypto/sha256"
	"errors"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/internal/testwait"
)

// gate holds the first review of a kind until released, so that a burst of requests all
// miss the cache while it is in flight.
func gate(api *apiserver, resource string) (release func()) {
	ch := make(chan struct{})
	var once sync.Once
	api.PrependReactor("create", resource, func(k8stesting.Action) (bool, runtime.Object, error) {
		<-ch
		return false, nil, nil // on to the apiserver's own answer
	})
	return func() { once.Do(func() { close(ch) }) }
}

// burst starts n calls at once and gives them time to miss the cache; wait waits for them.
func burst(n int, call func() error) (wait func() []error) {
	errs := make([]error, n)
	var started, done sync.WaitGroup
	started.Add(n)
	done.Add(n)
	for i := 0; i < n; i++ {
		go func(i int) {
			defer done.Done()
			started.Done()
			errs[i] = call()
		}(i)
	}
	started.Wait()
	time.Sleep(50 * time.Millisecond) // let them reach the review (no assertion on time)
	return func() []error { done.Wait(); return errs }
}

// A burst of one caller on a cold (or just expired) cache sends one TokenReview, not one
// per request in flight.
func TestTokenReviewsShared(t *testing.T) {
	api := newAPIServer()
	release := gate(api, "tokenreviews")
	a := &Authenticator{Client: api, TTL: time.Hour}
	alice := request("POST", map[string]string{"Authorization": "Bearer alice-token"}, nil)
	wait := burst(50, func() error {
		u, err := a.Authenticate(context.Background(), alice)
		if err == nil && u.Name != "alice" {
			err = errors.New(u.Name)
		}
		return err
	})
	release()
	for _, err := range wait() {
		if err != nil {
			t.Fatal(err)
		}
	}
	if api.tokenReviews != 1 {
		t.Errorf("50 concurrent requests of one token sent %d TokenReviews, want 1", api.tokenReviews)
	}
	if c := a.Counts(); c.Reviews != 1 {
		t.Errorf("counts %+v", c)
	}
}

// Near the end of its TTL an accepted token is reviewed again in the background while
// requests are answered from the cache: a steady caller never waits for a review. A
// refresh that finds the token revoked ends it.
func TestTokenRefreshedAhead(t *testing.T) {
	api := newAPIServer()
	clock := fakekube.NewClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	a := &Authenticator{Client: api, Clock: clock, TTL: 10 * time.Second}
	alice := request("POST", map[string]string{"Authorization": "Bearer alice-token"}, nil)
	authOK := func() {
		t.Helper()
		if u, err := a.Authenticate(ctx(t), alice); err != nil || u.Name != "alice" {
			t.Fatalf("%v, %v", u, err)
		}
	}
	authOK()
	clock.Add(4 * time.Second) // before half the TTL: no refresh
	authOK()
	if c := a.Counts(); c.Reviews != 1 {
		t.Fatalf("refreshed too early: %+v", c)
	}
	clock.Add(time.Second) // 5 s: answered from the cache, refreshed behind it
	authOK()
	testwait.For(t, func() bool { return refreshedAt(a, "alice-token").After(clock.Now()) && a.reviews.aheadDone() })
	clock.Add(6 * time.Second) // 11 s: past the first answer's TTL, within the refreshed one
	authOK()                   // (and past its half: refreshed again)
	testwait.For(t, func() bool { return refreshedAt(a, "alice-token").After(clock.Now()) && a.reviews.aheadDone() })
	if c := a.Counts(); c.Reviews != 3 || c.Hits != 3 {
		t.Errorf("counts %+v, want 3 reviews (the first and two refreshes) and 3 hits", c)
	}
	// Revoked: the next refresh drops the entry; the request after it is refused.
	delete(api.tokens, "alice-token")
	clock.Add(5 * time.Second) // 16 s: past the refreshed answer's half, within its TTL
	authOK()                   // still within its TTL: answered, and the refresh learns of the revocation
	testwait.For(t, func() bool { return refreshedAt(a, "alice-token").IsZero() })
	if _, err := a.Authenticate(ctx(t), alice); !errors.Is(err, ErrUnauthenticated) {
		t.Errorf("a token revoked at its refresh: %v", err)
	}
}

func refreshedAt(a *Authenticator, token string) time.Time {
	accepted, _ := a.caches()
	v, ok := accepted.Get(sha256Of(token))
	if !ok {
		return time.Time{}
	}
	return v.(acceptedToken).refreshAt
}

// A burst of one user's requests on a cold cache sends one SubjectAccessReview per need.
func TestAccessReviewsShared(t *testing.T) {
	api := newAPIServer()
	api.grants["alice/create/secrets/team-a"] = true
	release := gate(api, "subjectaccessreviews")
	a := &Authorizer{Client: api, TTL: time.Hour}
	alice := &User{Name: "alice", UID: "u-a"}
	create := Need{Verb: "create", Resource: "secrets", Namespace: "team-a"}
	wait := burst(50, func() error { return a.Check(context.Background(), alice, create) })
	release()
	for _, err := range wait() {
		if err != nil {
			t.Fatal(err)
		}
	}
	if api.accessReviews != 1 {
		t.Errorf("50 concurrent checks of one need sent %d SubjectAccessReviews, want 1", api.accessReviews)
	}
}

// An allowed answer near its end is refreshed in the background; a refresh that finds the
// grant gone ends it.
func TestAccessRefreshedAhead(t *testing.T) {
	api := newAPIServer()
	api.grants["alice/create/secrets/team-a"] = true
	clock := fakekube.NewClock(time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC))
	a := &Authorizer{Client: api, Clock: clock, TTL: 10 * time.Second}
	alice := &User{Name: "alice"}
	create := Need{Verb: "create", Resource: "secrets", Namespace: "team-a"}
	if err := a.Check(ctx(t), alice, create); err != nil {
		t.Fatal(err)
	}
	delete(api.grants, "alice/create/secrets/team-a")
	clock.Add(8 * time.Second)
	if err := a.Check(ctx(t), alice, create); err != nil {
		t.Fatalf("within its TTL: %v", err)
	}
	testwait.For(t, func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		_, ok := a.caches().allowed.get(Share(alice.Name), cacheKey(alice, create), clock.Now())
		return !ok
	})
	if err := a.Check(ctx(t), alice, create); !errors.Is(err, ErrForbidden) {
		t.Errorf("a grant removed before the refresh: %v", err)
	}
	if c := a.Counts(); c.Reviews != 3 || c.Hits != 1 {
		t.Errorf("counts %+v", c)
	}
}

func sha256Of(token string) [32]byte { return sha256.Sum256([]byte(token)) }

// Refreshes ahead are bounded in flight: nobody waits for them, so without a bound one list
// past half its answers' TTL starts a review per namespace at once on the shared client.
// A refresh that finds no slot waits for one (it was skipped before: this test saw 9
// reviews of 1,001 there), and one that ends frees its slot.
func TestRefreshesAheadAreBounded(t *testing.T) {
	var r reviewGroup
	release := make(chan struct{})
	var inFlight, most int64
	var mu sync.Mutex
	review := func(context.Context) (any, error) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
		return nil, nil
	}
	for i := range 1000 {
		r.ahead(string(rune('a'+i%26))+string(rune(i)), review)
	}
	testwait.For(t, func() bool { mu.Lock(); defer mu.Unlock(); return inFlight >= aheadAtOnce })
	if n := r.counts().Reviews; n != aheadAtOnce {
		t.Errorf("1,000 refreshes ahead of distinct keys started %d reviews at once, want %d", n, aheadAtOnce)
	}
	close(release)
	// Every refresh asked for is sent, aheadAtOnce at a time: skipped, the 992 others
	// expired together and the next list reviewed them in the foreground.
	testwait.For(t, func() bool { return r.counts().Reviews == 1000 })
	testwait.For(t, func() bool { r.aheadMu.Lock(); defer r.aheadMu.Unlock(); return r.aheadRunning == 0 })
	r.ahead("after", func(context.Context) (any, error) { return nil, nil })
	testwait.For(t, func() bool { return r.counts().Reviews == 1001 })
	mu.Lock()
	defer mu.Unlock()
	if most > aheadAtOnce {
		t.Errorf("%d refreshes ahead ran at once, want at most %d", most, aheadAtOnce)
	}
}
