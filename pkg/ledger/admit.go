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
}

// Limits are admission's bounds (0: none).
type Limits struct {
	// Max is the service's bound (MAX_QUEUED): from there on only a tenant within its
	// share is admitted, up to Ceiling.
	Max int
	// PerNamespace is the most one namespace may hold (MAX_QUEUED_PER_NAMESPACE).
	PerNamespace int
}

// Ceiling is where everyone is refused: tenants within their share may together go past
// Max, by at most as much again.
func (l Limits) Ceiling() int { return 2 * l.Max }

// Refusal says why a request is not admitted; nil admits.
type Refusal struct {
	// Scope names the bound: "in namespace <ns>", "of namespace <ns> over its share",
	// "of the caller over its share", "in the cluster".
	Scope string
	// Queued is the count that reached Limit.
	Queued, Limit int
}

// Decide admits a request or says which bound refuses it. Below Max everyone is admitted
// (work-conserving: a tenant alone may use the whole bound); from Max a namespace or a
// caller holding its share (Max over the number of namespaces, or of callers, holding
// entries) or more is refused, and one within its share is still admitted; at the
// Ceiling everyone is refused.
func Decide(c Counts, l Limits) *Refusal {
	if l.PerNamespace > 0 && c.Namespace >= l.PerNamespace {
		return &Refusal{Scope: "in the namespace", Queued: c.Namespace, Limit: l.PerNamespace}
	}
	if l.Max <= 0 || c.Total < l.Max {
		return nil
	}
	if c.Total >= l.Ceiling() {
		return &Refusal{Scope: "in the cluster", Queued: c.Total, Limit: l.Ceiling()}
	}
	if share := shareOf(l.Max, c.Namespaces); c.Namespace >= share {
		return &Refusal{Scope: "of the namespace, over its share", Queued: c.Namespace, Limit: share}
	}
	if share := shareOf(l.Max, c.Callers); c.Caller >= share {
		return &Refusal{Scope: "of the caller, over its share", Queued: c.Caller, Limit: share}
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
