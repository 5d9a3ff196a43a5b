package source

import (
	"context"
	"errors"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/pkg/wallclock"
)

// CallerLimits is a token bucket per caller for the routes that fetch and render charts:
// any valid token may call them, so one caller must not keep submit busy for everyone.
type CallerLimits struct {
	Rate  float64 // tokens a second
	Burst int
	// MaxCallers bounds the callers remembered (default 10,000); when full, those whose
	// bucket is full again are forgotten.
	MaxCallers int
	Clock      clock.PassiveClock // nil: the wall clock

	mu       sync.Mutex
	byCaller map[string]*rate.Limiter
}

// Allow takes a token of caller's bucket; without one, it says when the next one comes.
func (l *CallerLimits) Allow(caller string) (bool, time.Duration) {
	now := wallclock.Or(l.Clock).Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.byCaller[caller]
	if !ok {
		l.forgetFull(now)
		lim = rate.NewLimiter(rate.Limit(l.Rate), max(l.Burst, 1))
		if l.byCaller == nil {
			l.byCaller = map[string]*rate.Limiter{}
		}
		l.byCaller[caller] = lim
	}
	if lim.AllowN(now, 1) {
		return true, 0
	}
	if l.Rate <= 0 {
		return false, time.Duration(math.MaxInt64)
	}
	missing := 1 - lim.TokensAt(now)
	return false, time.Duration(missing / l.Rate * float64(time.Second))
}

// forgetFull makes room for one more caller.
func (l *CallerLimits) forgetFull(now time.Time) {
	limit := positiveOr(l.MaxCallers, 10000)
	if len(l.byCaller) < limit {
		return
	}
	for c, lim := range l.byCaller {
		if lim.TokensAt(now) >= float64(lim.Burst()) {
			delete(l.byCaller, c)
		}
	}
	for c := range l.byCaller { // all busy: any one goes (map order)
		if len(l.byCaller) < limit {
			break
		}
		delete(l.byCaller, c)
	}
}

// ErrCredentialsRefused: a repository's credentials were not sent, the caller may not read
// their Secrets (or they changed while fetching).
var ErrCredentialsRefused = errors.New("chart repository credentials refused")

// Caller is who a fetch is for (events.Caller); an empty User is a trusted local run.
type Caller struct {
	User, UID string
	Groups    []string
	Extra     map[string][]string
}

type callerKey struct{}

// WithCaller carries the caller of a fetch to the credential checks and readers.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom is the caller WithCaller put into ctx; ok is false when there is none.
func CallerFrom(ctx context.Context) (c Caller, ok bool) {
	c, ok = ctx.Value(callerKey{}).(Caller)
	return c, ok
}
