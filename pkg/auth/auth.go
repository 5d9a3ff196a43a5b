// Package auth is who the caller of submit is (TokenReview, or the OpenShift console's
// session cookie with its CSRF double-submit check) and what they may do
// (SubjectAccessReview), so that async-helm acts as the user who asked.
package auth

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/pkg/wallclock"
)

// Sentinel errors; the edge answers 401 and 403.
var (
	ErrUnauthenticated = errors.New("unauthenticated")
	ErrForbidden       = errors.New("forbidden")
)

// Cookie names and header of the OpenShift console.
const (
	SessionCookie = "openshift-session-token"
	CSRFCookie    = "csrf-token"
	CSRFHeader    = "X-CSRFToken"
)

// User is an authenticated caller. It never holds the token.
type User struct {
	Name   string              `json:"user"`
	UID    string              `json:"uid,omitempty"`
	Groups []string            `json:"groups,omitempty"`
	Extra  map[string][]string `json:"extra,omitempty"`
}

// Authenticator validates tokens with the API server, caching answers briefly so the path
// to 201 does not pay a TokenReview per request, and so a flood of bad tokens does not
// send a TokenReview per request either (anyone who reaches submit can send them).
type Authenticator struct {
	// Client sends the TokenReviews. Give it a client of its own (its own rate limiter):
	// reviews of unknown tokens then never queue the reservations of good callers.
	Client kubernetes.Interface
	// TTL is how long an accepted token is trusted without a review (default 10 s).
	TTL time.Duration
	// RejectedTTL is how long a rejected token is refused without a review (default 10 s);
	// a token that becomes valid (rare: tokens are valid from their issue) waits that long.
	RejectedTTL time.Duration
	// CacheSize bounds each cache, least recently used out (default 10,000).
	CacheSize int
	// Clock is the time of the caches (tests move it by hand); nil is the wall clock.
	Clock clock.PassiveClock

	once     sync.Once
	accepted *cache.LRUExpireCache // sha256(token) -> acceptedToken
	rejected *cache.LRUExpireCache // sha256(token) -> error
	reviews  reviewGroup
}

// acceptedToken is a cached TokenReview answer; past refreshAt (half its TTL) the next
// request starts one review in the background and is answered from the cache meanwhile.
type acceptedToken struct {
	user      *User
	refreshAt time.Time
}

func (a *Authenticator) caches() (accepted, rejected *cache.LRUExpireCache) {
	a.once.Do(func() {
		size := a.CacheSize
		if size <= 0 {
			size = 10000
		}
		a.accepted = cache.NewLRUExpireCacheWithClock(size, wallclock.Or(a.Clock))
		a.rejected = cache.NewLRUExpireCacheWithClock(size, wallclock.Or(a.Clock))
	})
	return a.accepted, a.rejected
}

// Authenticate finds the caller of r: a bearer token, else the console's session cookie
// (with the CSRF double-submit check on requests that change something).
func (a *Authenticator) Authenticate(ctx context.Context, r *http.Request) (*User, error) {
	token := ""
	if h := r.Header.Get("Authorization"); h != "" {
		t, ok := strings.CutPrefix(h, "Bearer ")
		if !ok || t == "" {
			return nil, fmt.Errorf("%w: Authorization header is not a bearer token", ErrUnauthenticated)
		}
		token = t
	} else if c, err := r.Cookie(SessionCookie); err == nil && c.Value != "" {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			csrf, err := r.Cookie(CSRFCookie)
			hdr := r.Header.Get(CSRFHeader)
			if err != nil || csrf.Value == "" || subtle.ConstantTimeCompare([]byte(csrf.Value), []byte(hdr)) != 1 {
				return nil, fmt.Errorf("%w: CSRF check failed (the %s cookie must equal the %s header)", ErrForbidden, CSRFCookie, CSRFHeader)
			}
		}
		token = c.Value
	} else {
		return nil, fmt.Errorf("%w: no bearer token and no %s cookie", ErrUnauthenticated, SessionCookie)
	}
	u, err := a.review(ctx, token)
	if err != nil {
		return nil, err
	}
	if err := refusePrivileged(u); err != nil {
		return nil, err
	}
	return u, nil
}

// PrivilegedGroup bypasses every authorization check of the API server (no RBAC rule
// applies to it, and it cannot be taken away by RBAC). The executor acts as the caller by
// impersonation; acting as this group would turn the executor's impersonation right into
// unlimited rights, so its members are refused: use an identity bound to a ClusterRole.
const PrivilegedGroup = "system:masters"

func refusePrivileged(u *User) error {
	if slices.Contains(u.Groups, PrivilegedGroup) {
		return fmt.Errorf("%w: user %q is in group %s, which async-helm does not act as; use an identity whose rights come from RBAC (e.g. a ServiceAccount bound to cluster-admin)",
			ErrForbidden, u.Name, PrivilegedGroup)
	}
	return nil
}

// review answers from the caches; a miss sends one TokenReview for every request that
// misses on the same token at once, and an entry near its end is refreshed ahead, so that a
// steady caller never waits for a review at all.
func (a *Authenticator) review(ctx context.Context, token string) (*User, error) {
	key := sha256.Sum256([]byte(token))
	accepted, rejected := a.caches()
	if v, ok := accepted.Get(key); ok {
		e := v.(acceptedToken)
		if !wallclock.Or(a.Clock).Now().Before(e.refreshAt) {
			a.reviews.ahead(string(key[:]), func(ctx context.Context) (any, error) { return a.send(ctx, key, token) })
		}
		a.reviews.hits.Add(1)
		return e.user, nil
	}
	if err, ok := rejected.Get(key); ok {
		a.reviews.hits.Add(1)
		return nil, err.(error)
	}
	u, err := a.reviews.do(ctx, string(key[:]), func(ctx context.Context) (any, error) { return a.send(ctx, key, token) })
	if err != nil {
		return nil, err
	}
	return u.(*User), nil
}

// Counts says how the caches answered (hit rates under load).
func (a *Authenticator) Counts() CacheCounts { return a.reviews.counts() }

// send reviews token and caches the answer.
func (a *Authenticator) send(ctx context.Context, key [32]byte, token string) (*User, error) {
	accepted, rejected := a.caches()
	sent := wallclock.Or(a.Clock).Now() // the answer is as old as its question: the TTL runs from here
	tr, err := a.Client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token review: %w", err) // not the token's fault: not cached
	}
	if !tr.Status.Authenticated {
		err := fmt.Errorf("%w: token not accepted by the API server", ErrUnauthenticated)
		accepted.Remove(key) // a refresh that finds the token revoked ends it now
		rejected.Add(key, err, orDefault(a.RejectedTTL))
		return nil, err
	}
	u := &User{Name: tr.Status.User.Username, UID: tr.Status.User.UID, Groups: tr.Status.User.Groups}
	if len(tr.Status.User.Extra) > 0 {
		u.Extra = map[string][]string{}
		for k, v := range tr.Status.User.Extra {
			u.Extra[k] = v
		}
	}
	ttl := orDefault(a.TTL)
	if left := sent.Add(ttl).Sub(wallclock.Or(a.Clock).Now()); left > 0 {
		accepted.Add(key, acceptedToken{user: u, refreshAt: sent.Add(ttl / 2)}, left)
	}
	return u, nil
}

func orDefault(ttl time.Duration) time.Duration {
	if ttl <= 0 {
		return 10 * time.Second
	}
	return ttl
}

// Authorizer asks the API server what a user may do, caching "allowed" briefly (as the API
// server's own webhook authorizer does) so the path to 201 does not pay two reviews a request.
// A revoked grant is honoured within TTL.
type Authorizer struct {
	Client kubernetes.Interface
	TTL    time.Duration
	// Clock is the time of the cache (tests move it by hand); nil is the wall clock.
	Clock clock.PassiveClock

	mu sync.Mutex
	// allowedUntil caches positive answers; deniedUntil negative ones, for Allowed only;
	// each caller within its own share.
	allowedUntil *shareCache[allowedEntry]
	deniedUntil  *shareCache[deniedEntry]
	reviews      reviewGroup
}

// allowedEntry is a cached "allowed": trusted until until, refreshed ahead from refreshAt.
type allowedEntry struct{ until, refreshAt time.Time }

// deniedEntry is a cached denial (Allowed only), kept and refreshed as allowedEntry.
type deniedEntry struct{ until, refreshAt time.Time }

// Need is one permission a request needs; Name, when set, is one object (a Secret a
// chart repository names).
type Need struct {
	Verb, Resource, Namespace string
	Name                      string
}

// Check returns ErrForbidden naming the first permission the user lacks.
func (a *Authorizer) Check(ctx context.Context, u *User, needs ...Need) error {
	for _, n := range needs {
		ok, err := a.allowed(ctx, u, n)
		if err != nil {
			return err
		}
		if !ok {
			what := n.Resource
			if n.Name != "" {
				what += "/" + n.Name
			}
			return fmt.Errorf("%w: user %q cannot %s %s in namespace %q", ErrForbidden, u.Name, n.Verb, what, n.Namespace)
		}
	}
	return nil
}

// allowed answers from the cache, refreshing an entry near its end in the background;
// concurrent misses of one key share one review (see Authenticator.review).
func (a *Authorizer) allowed(ctx context.Context, u *User, n Need) (bool, error) {
	key := cacheKey(u, n)
	now := wallclock.Or(a.Clock).Now()
	review := func(ctx context.Context) (any, error) { return a.send(ctx, key, u, n) }
	a.mu.Lock()
	e, ok := a.caches().allowed.get(Share(u.Name), key, now)
	a.mu.Unlock()
	if ok && now.Before(e.until) {
		if !now.Before(e.refreshAt) {
			a.reviews.ahead(string(key[:]), review)
		}
		a.reviews.hits.Add(1)
		return true, nil
	}
	ok2, err := a.reviews.do(ctx, string(key[:]), review)
	if err != nil {
		return false, err
	}
	return ok2.(bool), nil
}

// authzCaches are an Authorizer's two caches.
type authzCaches struct {
	allowed *shareCache[allowedEntry]
	denied  *shareCache[deniedEntry]
}

// caches makes the caches on first use (a zero Authorizer works); a.mu is held.
func (a *Authorizer) caches() authzCaches {
	if a.allowedUntil == nil {
		a.allowedUntil, a.deniedUntil = newShareCache[allowedEntry](), newShareCache[deniedEntry]()
	}
	return authzCaches{allowed: a.allowedUntil, denied: a.deniedUntil}
}

// Counts says how the cache answered (hit rates under load).
func (a *Authorizer) Counts() CacheCounts { return a.reviews.counts() }

// send asks the API server and caches an "allowed"; a refresh that finds the grant gone
// drops the entry.
func (a *Authorizer) send(ctx context.Context, key [32]byte, u *User, n Need) (bool, error) {
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = v
	}
	sent := wallclock.Or(a.Clock).Now() // the answer is as old as its question: the TTL runs from here
	sar, err := a.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Name, UID: u.UID, Groups: u.Groups, Extra: extra,
		ResourceAttributes: &authzv1.ResourceAttributes{Verb: n.Verb, Resource: n.Resource, Namespace: n.Namespace, Name: n.Name},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("subject access review: %w", err)
	}
	share := Share(u.Name)
	a.mu.Lock()
	defer a.mu.Unlock()
	c := a.caches()
	if !sar.Status.Allowed {
		c.allowed.delete(share, key)
		return false, nil // denials are not cached: a new grant works at once
	}
	ttl := orDefault(a.TTL)
	c.allowed.put(share, key, allowedEntry{until: sent.Add(ttl), refreshAt: sent.Add(ttl / 2)}, sent,
		func(e allowedEntry) bool { return !sent.Before(e.until) })
	c.denied.delete(share, key)
	return true, nil
}

// Allowed reports whether u may do n (for filtering lists). Unlike Check, it caches a
// denial for TTL: an all-namespaces list reviews every namespace holding records, and
// without it a tenant repeating its list would make submit review every other tenant's
// namespace each time. A denial used past half its TTL is refreshed behind the answer, as
// an allowed answer is, so that a caller who lists again and again never finds all its
// denials expired at once. A list may show a namespace granted since up to TTL late.
func (a *Authorizer) Allowed(ctx context.Context, u *User, n Need) (bool, error) {
	key := cacheKey(u, n)
	now := wallclock.Or(a.Clock).Now()
	a.mu.Lock()
	e, denied := a.caches().denied.get(Share(u.Name), key, now)
	a.mu.Unlock()
	if denied && now.Before(e.until) {
		if !now.Before(e.refreshAt) {
			a.reviews.ahead(string(key[:]), func(ctx context.Context) (any, error) { return a.sendKeepingDenial(ctx, key, u, n) })
		}
		a.reviews.hits.Add(1)
		return false, nil
	}
	ok, err := a.allowed(ctx, u, n)
	if err == nil && !ok {
		a.keepDenial(u, key, now)
	}
	return ok, err
}

// sendKeepingDenial is send for a denial refreshed ahead: a denial found again is kept
// for another TTL (a grant found ends it: send).
func (a *Authorizer) sendKeepingDenial(ctx context.Context, key [32]byte, u *User, n Need) (bool, error) {
	sent := wallclock.Or(a.Clock).Now()
	ok, err := a.send(ctx, key, u, n)
	if err == nil && !ok {
		a.keepDenial(u, key, sent)
	}
	return ok, err
}

// keepDenial caches u's denial of key as answered at sent.
func (a *Authorizer) keepDenial(u *User, key [32]byte, sent time.Time) {
	ttl := orDefault(a.TTL)
	a.mu.Lock()
	defer a.mu.Unlock()
	a.caches().denied.put(Share(u.Name), key, deniedEntry{until: sent.Add(ttl), refreshAt: sent.Add(ttl / 2)}, sent,
		func(e deniedEntry) bool { return !sent.Before(e.until) })
}
