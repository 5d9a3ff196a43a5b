package source

import (
	"fmt"
	"testing"
	"time"
)

// A namespace that fills the chart cache pushes out its own least recently used charts,
// not another namespace's older one.
func TestCacheEvictsTheLargestNamespaceFirst(t *testing.T) {
	s := &Source{MaxCacheBytes: 4 << 20, byKey: map[string]*cached{}}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	put := func(ns string, i int) {
		key := fmt.Sprintf("%s|chart-%d", ns, i)
		s.byKey[key] = &cached{chart: &Chart{Digest: key, size: 1 << 20}, namespace: ns, used: at}
		at = at.Add(time.Second)
		s.evict()
	}
	put("team", 0)
	for i := range 10 {
		put("burst", i)
	}
	if _, ok := s.byKey["team|chart-0"]; !ok {
		t.Errorf("team's one chart was evicted by burst's ten (cache: %d entries)", len(s.byKey))
	}
	if _, ok := s.byKey["burst|chart-9"]; !ok || len(s.byKey) != 4 {
		t.Errorf("cache holds %d entries (burst's newest kept: %v), want 4 with it", len(s.byKey), ok)
	}
}
