package ledger

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// gathered is every sample of reg as "name{namespace}" -> value.
func gathered(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			out[f.GetName()+"{"+m.GetLabel()[0].GetValue()+"}"] = m.GetGauge().GetValue()
		}
	}
	return out
}

// Each scrape says the ledger's queues as they are now: a count and the oldest's age per
// namespace and per caller (over all its namespaces), and no series for a namespace or a
// caller whose queue emptied.
func TestQueueMetrics(t *testing.T) {
	c := testingclock.NewFakeClock(t0.Add(100 * time.Second))
	b := NewBook(time.Hour, c)
	for _, e := range []Entry{entry("a1", "team-a", "u", 10), entry("a2", "team-a", "u", 20), entry("a3", "team-a", "v", 30),
		entry("b1", "team-b", "u", 95)} {
		b.Added(e)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewQueueMetrics(b))
	want := map[string]float64{
		"asynchelm_queue_revisions{team-a}": 3, "asynchelm_queue_oldest_age_seconds{team-a}": 90,
		"asynchelm_queue_revisions{team-b}": 1, "asynchelm_queue_oldest_age_seconds{team-b}": 5,
		"asynchelm_queue_caller_revisions{u}": 3, "asynchelm_queue_caller_oldest_age_seconds{u}": 90,
		"asynchelm_queue_caller_revisions{v}": 1, "asynchelm_queue_caller_oldest_age_seconds{v}": 70,
	}
	got := gathered(t, reg)
	if len(got) != len(want) {
		t.Fatalf("samples %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	b.Consumed(consumed.LeaseName("b1"))
	b.Consumed(consumed.LeaseName("a1"))
	b.Consumed(consumed.LeaseName("a3"))
	got = gathered(t, reg)
	if len(got) != 4 || got["asynchelm_queue_revisions{team-a}"] != 1 || got["asynchelm_queue_oldest_age_seconds{team-a}"] != 80 ||
		got["asynchelm_queue_caller_revisions{u}"] != 1 || got["asynchelm_queue_caller_oldest_age_seconds{u}"] != 80 {
		t.Fatalf("after b1, a1 and a3 were consumed: %v", got)
	}
}
