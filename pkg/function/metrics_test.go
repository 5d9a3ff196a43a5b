package function

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/async-helm/async-helm/pkg/events"
)

// Requests are counted by the route pattern that served them, with their status code.
func TestInstrumentCountsByRoute(t *testing.T) {
	m := newMetrics("submit")
	mux := http.NewServeMux()
	mux.HandleFunc("POST /api/helm/release/async", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })
	mux.HandleFunc("GET /api/helm/release", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "{}") })
	h := m.instrument(mux)
	for _, r := range []*http.Request{
		httptest.NewRequest("POST", "/api/helm/release/async", nil),
		httptest.NewRequest("POST", "/api/helm/release/async", nil),
		httptest.NewRequest("GET", "/api/helm/release?ns=a&name=b", nil),
		httptest.NewRequest("GET", "/nothing/here", nil),
	} {
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	for _, tc := range []struct {
		route, code string
		want        float64
	}{
		{"POST /api/helm/release/async", "201", 2},
		{"GET /api/helm/release", "200", 1},
		{"other", "404", 1},
	} {
		if got := value(t, m.requests.WithLabelValues(tc.route, tc.code)); got != tc.want {
			t.Errorf("requests{%s,%s} = %v, want %v", tc.route, tc.code, got, tc.want)
		}
	}
	// /metrics serves the registry, and is not itself a function route.
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	body := rec.Body.String()
	if rec.Code != http.StatusOK || !strings.Contains(body, `asynchelm_submit_http_requests_total{code="201",route="POST /api/helm/release/async"} 2`) {
		t.Errorf("/metrics: %d\n%s", rec.Code, body)
	}
}

func TestEventAndActionCounters(t *testing.T) {
	m := newMetrics("executor")
	m.EventSent(events.TypeInstallAccepted, nil)
	m.EventSent(events.TypeInstallAccepted, errors.New("refused"))
	m.EventSent(events.TypeInstallAccepted, errors.New("refused"))
	m.ActionDone("install", "deployed", 3*time.Second)
	if got := value(t, m.eventsSent.WithLabelValues(events.TypeInstallAccepted, "ack")); got != 1 {
		t.Errorf("acked %v", got)
	}
	if got := value(t, m.eventsSent.WithLabelValues(events.TypeInstallAccepted, "failed")); got != 2 {
		t.Errorf("failed %v", got)
	}
	if got := value(t, m.actions.WithLabelValues("install", "deployed")); got != 1 {
		t.Errorf("actions %v", got)
	}
	var d dto.Metric
	if err := m.actionDuration.WithLabelValues("install", "deployed").(prometheus.Metric).Write(&d); err != nil ||
		d.GetHistogram().GetSampleCount() != 1 || d.GetHistogram().GetSampleSum() != 3 {
		t.Errorf("duration %v, %v", d.GetHistogram(), err)
	}
}

// The sender built for a function reports every send to its metrics.
func TestNewSenderIsCounted(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusAccepted) }))
	defer srv.Close()
	m := newMetrics("notifier")
	s, err := NewSender(events.SinkConfig{Sink: srv.URL}, m)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := events.NewStatus(events.StatusChange{Namespace: "ns", Name: "web", Revision: 1, Status: "deployed"})
	if err := s.Send(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	if got := value(t, m.eventsSent.WithLabelValues(e.Type(), "ack")); got != 1 {
		t.Errorf("sent %v", got)
	}
	if s, err := NewSender(events.SinkConfig{Sink: srv.URL}, nil); err != nil || s.Observe != nil {
		t.Errorf("without metrics: %v", err)
	}
}

// value reads a counter.
func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}
