package repos

import (
	"container/list"
	"sync"

	"github.com/async-helm/async-helm/pkg/fairqueue"
)

// answers keeps encoded indexes by version within a byte budget, each charged to the
// tenant whose request encoded it. A tenant (its caller, its namespace) keeps at most
// share bytes: past it, its own least recently used answers go first, so a tenant that
// rotates between versions evicts its own answers. Past the budget, the least recently
// used answer of the caller holding the most goes.
type answers struct {
	budget, share int64
	maxEntries    int

	mu     sync.Mutex
	byKey  map[string]*list.Element // of *answer
	order  *list.List               // front: most recently used
	bytes  int64
	byUser map[string]int64 // bytes held, by callerKey and namespaceKey
}

type answer struct {
	key   string
	owner fairqueue.Flow
	got   encoded
}

func newAnswers(budget int64) *answers {
	return &answers{budget: budget, maxEntries: 1024, byKey: map[string]*list.Element{},
		order: list.New(), byUser: map[string]int64{}}
}

func answerCallerKey(f fairqueue.Flow) string    { return "caller/" + f.Caller }
func answerNamespaceKey(f fairqueue.Flow) string { return "namespace/" + f.Namespace }

// tenantShare is share, or half the budget when unset.
func (a *answers) tenantShare() int64 {
	if a.share > 0 {
		return a.share
	}
	return a.budget / 2
}

func (a *answers) get(key string) (encoded, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.byKey[key]
	if !ok {
		return encoded{}, false
	}
	a.order.MoveToFront(e)
	return e.Value.(*answer).got, true
}

// put keeps got under key, charged to owner, within owner's share and the budget.
func (a *answers) put(key string, got encoded, owner fairqueue.Flow) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := int64(len(got.yaml))
	if _, ok := a.byKey[key]; ok || n > a.tenantShare() || n > a.budget {
		return
	}
	for _, k := range []string{answerCallerKey(owner), answerNamespaceKey(owner)} {
		for a.byUser[k]+n > a.tenantShare() && a.evictOldestOf(k) {
		}
	}
	for a.bytes+n > a.budget || a.order.Len() >= a.maxEntries {
		if !a.evictOldestOf(a.heaviestCaller()) {
			break
		}
	}
	a.byKey[key] = a.order.PushFront(&answer{key: key, owner: owner, got: got})
	a.charge(owner, n)
}

// heaviestCaller is the callerKey holding the most bytes (entries: the one holding any).
func (a *answers) heaviestCaller() string {
	var top string
	var most int64 = -1
	for e := a.order.Back(); e != nil; e = e.Prev() {
		k := answerCallerKey(e.Value.(*answer).owner)
		if b := a.byUser[k]; b > most {
			top, most = k, b
		}
	}
	return top
}

// evictOldestOf drops the least recently used answer charged to user key k.
func (a *answers) evictOldestOf(k string) bool {
	for e := a.order.Back(); e != nil; e = e.Prev() {
		an := e.Value.(*answer)
		if answerCallerKey(an.owner) == k || answerNamespaceKey(an.owner) == k {
			a.order.Remove(e)
			delete(a.byKey, an.key)
			a.charge(an.owner, -int64(len(an.got.yaml)))
			return true
		}
	}
	return false
}

func (a *answers) charge(owner fairqueue.Flow, n int64) {
	a.bytes += n
	for _, k := range []string{answerCallerKey(owner), answerNamespaceKey(owner)} {
		if a.byUser[k] += n; a.byUser[k] == 0 {
			delete(a.byUser, k)
		}
	}
}
