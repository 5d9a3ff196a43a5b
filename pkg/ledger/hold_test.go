package ledger

import "testing"

// An admitted request counts from its admission, before its entry is added: requests in
// flight cannot all pass one check. Its release gives the place back, once.
func TestAdmitHoldsItsPlaceUntilReleased(t *testing.T) {
	b := NewBook(0, nil)
	lim := Limits{Max: 100, PerNamespace: 2}
	first, r := b.Admit("ns", "mallory", lim)
	if r != nil {
		t.Fatalf("first: %+v", r)
	}
	second, r := b.Admit("ns", "mallory", lim)
	if r != nil {
		t.Fatalf("second: %+v", r)
	}
	if _, r := b.Admit("ns", "mallory", lim); r == nil || r.Queued != 2 {
		t.Fatalf("third, two held in the namespace: %+v, want refused at 2", r)
	}
	if c := b.Counts("ns", "mallory"); c.Total != 2 || c.Namespace != 2 || c.Caller != 2 {
		t.Errorf("counts with two held: %+v", c)
	}
	first()
	first() // a second release gives back nothing more
	if c := b.Counts("ns", "mallory"); c.Total != 1 || c.Namespace != 1 || c.Caller != 1 {
		t.Errorf("counts after one release: %+v", c)
	}
	if _, r := b.Admit("other", "bob", lim); r != nil {
		t.Errorf("another tenant: %+v", r)
	}
	second()
}
