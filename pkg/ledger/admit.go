package ledger

// Counts is what admission knows of the ledger when a request arrives, for its tenant.
type Counts struct {
	// Total is every accepted, not yet consumed request.
	Total int
	// Namespace and Caller are the requesting namespace's and caller's.
	Namespace, Caller int
	// Namespaces and Callers are how many namespaces and callers hold entries, the
	// requesting ones included.
	Namespaces, Callers int
	// Retained is the same of the consumed records kept: the requests made within their
	// retention (docs/design.md, "Retained requests").
	Retained Tally
}

// Limits are admission's bounds (0: none).
type Limits struct {
	// Max is the service's bound (MAX_QUEUED): from there on only a tenant within its
	// share is admitted, up to Ceiling.
	Max int
	// PerNamespace is the most one namespace may hold (MAX_QUEUED_PER_NAMESPACE).
	PerNamespace int
	// MaxRetained is the bound of the requests whose consumed records are kept
	// (MAX_RETAINED): from there on only a tenant within its share is admitted.
	MaxRetained int
}

// Ceiling is where everyone is refused: tenants within their share may together go past
// Max, by at most as much again.
func (l Limits) Ceiling() int { return 2 * l.Max }

// Refusal says why a request is not admitted; nil admits.
type Refusal struct {
	// Scope names the bound: "in namespace <ns>", "of namespace <ns> over its share",
	// "of the caller over its share", "in the cluster".
	Scope string
	// Counted is what was counted: CountedQueued or CountedRetained.
	Counted string
	// Queued is the count that reached Limit.
	Queued, Limit int
}

// What a refusal counted: accepted requests not yet consumed, or consumed records kept.
const (
	CountedQueued   = "queued"
	CountedRetained = "retained"
)

// Decide admits a request or says which bound refuses it. Below Max everyone is admitted (a
// tenant alone may use the whole bound); from Max a namespace or caller holding its share
// (Max over the namespaces, or callers, holding entries) or more is refused, one within it
// still admitted; at the Ceiling everyone is refused. Retained requests are decided the same
// way against MaxRetained, without a ceiling.
func Decide(c Counts, l Limits) *Refusal {
	if l.PerNamespace > 0 && c.Namespace >= l.PerNamespace {
		return &Refusal{Scope: "in the namespace", Counted: CountedQueued, Queued: c.Namespace, Limit: l.PerNamespace}
	}
	if l.Max > 0 && c.Total >= l.Ceiling() {
		return &Refusal{Scope: "in the cluster", Counted: CountedQueued, Queued: c.Total, Limit: l.Ceiling()}
	}
	queued := Tally{Total: c.Total, Namespace: c.Namespace, Caller: c.Caller, Namespaces: c.Namespaces, Callers: c.Callers}
	if r := overShare(queued, l.Max); r != nil {
		r.Counted = CountedQueued
		return r
	}
	if r := overShare(c.Retained, l.MaxRetained); r != nil {
		r.Counted = CountedRetained
		return r
	}
	return nil
}

// overShare refuses, once t.Total reached max (0: no bound), a namespace or a caller
// holding its share of max or more.
func overShare(t Tally, max int) *Refusal {
	if max <= 0 || t.Total < max {
		return nil
	}
	if share := shareOf(max, t.Namespaces); t.Namespace >= share {
		return &Refusal{Scope: "of the namespace, over its share", Queued: t.Namespace, Limit: share}
	}
	if share := shareOf(max, t.Callers); t.Caller >= share {
		return &Refusal{Scope: "of the caller, over its share", Queued: t.Caller, Limit: share}
	}
	return nil
}

// shareOf is max divided among n tenants, rounded up, at least 1.
func shareOf(max, n int) int {
	if n < 1 {
		n = 1
	}
	return (max + n - 1) / n
}
