package repos

import "testing"

// Past the budget or maxEntries the cache evicts the oldest value of the owner holding the
// most; among equal totals, and when no value costs anything, the least recently used
// owner's.
func TestTenantLRUEvictsTheHeaviestOwnersOldest(t *testing.T) {
	type put struct {
		key   string
		cost  int64
		owner string
	}
	for _, tc := range []struct {
		name       string
		budget     int64
		maxEntries int
		puts       []put
		gone       string
	}{
		{"the heaviest owner loses its oldest", 10, 0,
			[]put{{"a1", 3, "a"}, {"b1", 2, "b"}, {"a2", 3, "a"}, {"b2", 3, "b"}}, "a1"},
		{"equal totals: the least recently used owner", 10, 0,
			[]put{{"b1", 3, "b"}, {"a1", 3, "a"}, {"a2", 2, "a"}, {"b2", 2, "b"}, {"c1", 1, "c"}}, "b1"},
		{"values that cost nothing still leave past maxEntries", 10, 2,
			[]put{{"a1", 0, "a"}, {"b1", 0, "b"}, {"c1", 0, "c"}}, "a1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newTenantLRU[int](tc.budget, 0, tc.maxEntries)
			for _, p := range tc.puts {
				c.put(p.key, 0, p.cost, true, p.owner)
			}
			for _, p := range tc.puts {
				if _, ok := c.get(p.key); ok == (p.key == tc.gone) {
					t.Errorf("%s kept: %v, want only %s evicted", p.key, ok, tc.gone)
				}
			}
		})
	}
}
