package notifier

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/pkg/release"
)

type fixedQueue []release.NamespaceQueue

func (f *fixedQueue) QueueByNamespace() []release.NamespaceQueue { return *f }

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

// Each scrape says the queue as it is now: a count and the oldest's age per namespace, and
// no series for a namespace whose queue emptied.
func TestQueueMetrics(t *testing.T) {
	now := time.Date(2026, 12, 3, 23, 0, 0, 0, time.UTC)
	src := &fixedQueue{{Namespace: "team-a", Count: 3, Oldest: now.Add(-90 * time.Second)}, {Namespace: "team-b", Count: 1, Oldest: now.Add(-5 * time.Second)}}
	m := NewQueueMetrics(src)
	m.Clock = fakekube.NewClock(now)
	reg := prometheus.NewRegistry()
	reg.MustRegister(m)
	want := map[string]float64{
		"asynchelm_queue_revisions{team-a}": 3, "asynchelm_queue_oldest_age_seconds{team-a}": 90,
		"asynchelm_queue_revisions{team-b}": 1, "asynchelm_queue_oldest_age_seconds{team-b}": 5,
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
	*src = (*src)[:1]
	if got := gathered(t, reg); len(got) != 2 || got["asynchelm_queue_revisions{team-a}"] != 3 {
		t.Fatalf("after team-b's queue emptied: %v", got)
	}
}
