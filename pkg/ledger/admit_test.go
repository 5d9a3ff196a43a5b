package ledger

import "testing"

func TestDecide(t *testing.T) {
	lim := Limits{Max: 2000, PerNamespace: 1000}
	for _, tc := range []struct {
		name  string
		c     Counts
		l     Limits
		scope string // "" admits
		limit int
	}{
		{"no bound", Counts{Total: 9000, Namespace: 9000, Namespaces: 1}, Limits{}, "", 0},
		{"below the bound", Counts{Total: 1999, Namespace: 999, Caller: 1999, Namespaces: 2, Callers: 1}, lim, "", 0},
		{"a namespace at its own bound", Counts{Total: 10, Namespace: 1000, Namespaces: 1}, lim, "in the namespace", 1000},
		{"a tenant alone may use the whole bound", Counts{Total: 1999, Namespace: 999, Caller: 1999, Namespaces: 2, Callers: 1}, lim, "", 0},
		{"issue 43: a newcomer after one user filled two namespaces", Counts{Total: 2000, Namespace: 0, Caller: 0, Namespaces: 3, Callers: 2}, lim, "", 0},
		{"the user who filled them, in a third namespace", Counts{Total: 2000, Namespace: 0, Caller: 2000, Namespaces: 3, Callers: 1}, lim, "of the caller, over its share", 2000},
		{"the same user after a newcomer came", Counts{Total: 2001, Namespace: 0, Caller: 2000, Namespaces: 3, Callers: 2}, lim, "of the caller, over its share", 1000},
		{"a namespace over its share, its caller within", Counts{Total: 2000, Namespace: 900, Caller: 10, Namespaces: 3, Callers: 90}, lim, "of the namespace, over its share", 667},
		{"a namespace just within its share", Counts{Total: 2000, Namespace: 666, Caller: 10, Namespaces: 3, Callers: 90}, lim, "", 0},
		{"no caller (authentication off): only namespaces", Counts{Total: 2100, Namespace: 10, Namespaces: 3}, lim, "", 0},
		{"at the ceiling everyone is refused", Counts{Total: 4000, Namespaces: 9, Callers: 9}, lim, "in the cluster", 4000},
		{"only a cluster bound", Counts{Total: 100, Namespace: 100, Namespaces: 1}, Limits{Max: 100}, "of the namespace, over its share", 100},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Decide(tc.c, tc.l)
			switch {
			case tc.scope == "" && r != nil:
				t.Errorf("refused %+v, want admitted", *r)
			case tc.scope != "" && (r == nil || r.Scope != tc.scope || r.Limit != tc.limit):
				t.Errorf("%+v, want refused %q at %d", r, tc.scope, tc.limit)
			}
		})
	}
}
