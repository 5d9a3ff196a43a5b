package auth

import (
	"strings"
	"time"
)

// Share is the tenant a user name accounts to: the user, except that the ServiceAccounts
// of one namespace are one (a namespace editor makes as many as it likes). The two kinds
// are told apart by a prefix up to a NUL, so no user name passes for a namespace's.
func Share(user string) string {
	const sa = "system:serviceaccount:"
	if rest, ok := strings.CutPrefix(user, sa); ok {
		if ns, _, found := strings.Cut(rest, ":"); found {
			return "serviceaccounts\x00" + ns
		}
	}
	return "user\x00" + user
}

// ShareName is Share as a name a person reads (a metric label, a log): the user, or
// system:serviceaccounts:<namespace>, the group of every ServiceAccount of that namespace.
func ShareName(user string) string {
	if ns, ok := strings.CutPrefix(Share(user), "serviceaccounts\x00"); ok {
		return "system:serviceaccounts:" + ns
	}
	return user
}

const (
	// defaultPerCaller is each caller's share of a cache: its own answers past it push out
	// only its own.
	defaultPerCaller = 1024
	// defaultCallers bounds the callers a cache keeps; past it the caller least recently
	// used goes, whole.
	defaultCallers = 4096
)

// shareCache keeps cached answers per caller (Share), each caller bounded to its own
// share, so that no caller's distinct needs evict another's answers. Not safe for
// concurrent use: its owner locks around it.
type shareCache[V any] struct {
	perCaller, callers int
	by                 map[string]*callerAnswers[V]
}

type callerAnswers[V any] struct {
	answers map[[32]byte]V
	used    time.Time
}

func newShareCache[V any]() *shareCache[V] {
	return &shareCache[V]{perCaller: defaultPerCaller, callers: defaultCallers, by: map[string]*callerAnswers[V]{}}
}

func (c *shareCache[V]) get(caller string, k [32]byte, now time.Time) (V, bool) {
	ca, ok := c.by[caller]
	if !ok {
		var zero V
		return zero, false
	}
	ca.used = now
	v, ok := ca.answers[k]
	return v, ok
}

func (c *shareCache[V]) delete(caller string, k [32]byte) {
	if ca, ok := c.by[caller]; ok {
		delete(ca.answers, k)
	}
}

// put keeps v for caller; a caller at its share first drops its expired answers, then,
// if still full, all of its own.
func (c *shareCache[V]) put(caller string, k [32]byte, v V, now time.Time, expired func(V) bool) {
	ca, ok := c.by[caller]
	if !ok {
		if len(c.by) >= c.callers {
			c.evictLeastUsed()
		}
		ca = &callerAnswers[V]{answers: map[[32]byte]V{}}
		c.by[caller] = ca
	}
	ca.used = now
	if _, had := ca.answers[k]; !had && len(ca.answers) >= c.perCaller {
		for key, old := range ca.answers {
			if expired(old) {
				delete(ca.answers, key)
			}
		}
		if len(ca.answers) >= c.perCaller {
			clear(ca.answers)
		}
	}
	ca.answers[k] = v
}

func (c *shareCache[V]) evictLeastUsed() {
	var oldest string
	var at time.Time
	for caller, ca := range c.by {
		if oldest == "" || ca.used.Before(at) {
			oldest, at = caller, ca.used
		}
	}
	delete(c.by, oldest)
}
