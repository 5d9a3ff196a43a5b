package fairqueue

import (
	"maps"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// samples are every gauge of reg as "name{pool,namespace,caller}" -> value.
func samples(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			l := map[string]string{}
			for _, p := range m.GetLabel() {
				l[p.GetName()] = p.GetValue()
			}
			key := f.GetName() + "{" + strings.Join([]string{l["pool"], l["namespace"], l["caller"]}, ",") + "}"
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}

// Each scrape shows every tenant's queue, longest wait and held slots per pool, and nothing
// of a tenant that neither holds nor waits any more.
func TestMetrics(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		h := newHarness(t, 1, false)
		reg := prometheus.NewRegistry()
		reg.MustRegister(NewMetrics("test_slots", Pool{Name: "render", Stats: h.q.Stats}))
		h.do("+a/u#1")
		h.do("+b/v#1")
		time.Sleep(3 * time.Second) // the bubble's clock
		want := map[string]float64{
			"test_slots_held{render,a,u}": 1, "test_slots_queued{render,a,u}": 0, "test_slots_oldest_wait_seconds{render,a,u}": 0,
			"test_slots_held{render,b,v}": 0, "test_slots_queued{render,b,v}": 1, "test_slots_oldest_wait_seconds{render,b,v}": 3,
		}
		if got := samples(t, reg); !maps.Equal(got, want) {
			t.Errorf("samples %v, want %v", got, want)
		}
		h.do("-a/u#1") // b/v#1 gets the seat
		h.do("-b/v#1")
		if got := samples(t, reg); len(got) != 0 {
			t.Errorf("samples after every seat was given back: %v, want none", got)
		}
	})
}
