package function

import (
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/async-helm/async-helm/pkg/events"
)

// Metrics are the Prometheus metrics of a function, in a registry of its own.
type Metrics struct {
	Registry        *prometheus.Registry
	requests        *prometheus.CounterVec
	requestDuration *prometheus.HistogramVec
	eventsSent      *prometheus.CounterVec
	actions         *prometheus.CounterVec
	actionDuration  *prometheus.HistogramVec
	stepDuration    *prometheus.HistogramVec
	// guard, when set, lets only an authorized scraper read /metrics.
	guard *MetricsGuard
}

func newMetrics(name string) *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "asynchelm", Subsystem: name,
			Name: "http_requests_total", Help: "HTTP requests by route and status code."}, []string{"route", "code"}),
		requestDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "asynchelm", Subsystem: name,
			Name: "http_request_duration_seconds", Help: "HTTP request duration by route.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 5, 30, 300, 3600}}, []string{"route"}),
		eventsSent: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "asynchelm", Subsystem: name,
			Name: "events_sent_total", Help: "CloudEvents sent, by type and result (ack, failed)."}, []string{"type", "result"}),
		actions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "asynchelm", Subsystem: name,
			Name: "actions_total", Help: "Helm actions by action and outcome."}, []string{"action", "outcome"}),
		actionDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "asynchelm", Subsystem: name,
			Name: "action_duration_seconds", Help: "Helm action duration by action and outcome.",
			Buckets: prometheus.ExponentialBuckets(0.5, 2, 14)}, []string{"action", "outcome"}),
		stepDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: "asynchelm", Subsystem: name,
			Name: "step_duration_seconds", Help: "Duration of each step on the way to an answer (submit: authorize, chart, reserve, send).",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}, []string{"step"}),
	}
	m.Registry.MustRegister(m.requests, m.requestDuration, m.eventsSent, m.actions, m.actionDuration, m.stepDuration,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// EventSent counts one send; err nil means the sink acknowledged it.
func (m *Metrics) EventSent(eventType string, err error) {
	result := "ack"
	if err != nil {
		result = "failed"
	}
	m.eventsSent.WithLabelValues(eventType, result).Inc()
}

// ActionDone counts one Helm action.
func (m *Metrics) ActionDone(action, outcome string, d time.Duration) {
	m.actions.WithLabelValues(action, outcome).Inc()
	m.actionDuration.WithLabelValues(action, outcome).Observe(d.Seconds())
}

// StepDone observes how long one step took.
func (m *Metrics) StepDone(step string, d time.Duration) {
	m.stepDuration.WithLabelValues(step).Observe(d.Seconds())
}

// instrument serves /metrics and counts every request of next by its route pattern.
func (m *Metrics) instrument(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	var serve http.Handler = promhttp.HandlerFor(m.Registry, promhttp.HandlerOpts{})
	if m.guard != nil {
		serve = m.guard.Wrap(serve)
	}
	mux.Handle("GET /metrics", serve)
	mux.Handle("/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		next.ServeHTTP(rec, r)
		route := r.Pattern // set by the function's ServeMux as it routes
		if route == "" {
			route = "other"
		}
		m.requests.WithLabelValues(route, strconv.Itoa(rec.code)).Inc()
		m.requestDuration.WithLabelValues(route).Observe(time.Since(start).Seconds())
	}))
	return mux
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (s *statusRecorder) WriteHeader(code int) {
	s.code = code
	s.ResponseWriter.WriteHeader(code)
}

// Unwrap lets a route reach the connection's own controls (http.ResponseController: a
// write deadline).
func (s *statusRecorder) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// NewSender is the function's event sender to its K_SINK, counted in m (when not nil).
func NewSender(cfg events.SinkConfig, m *Metrics) (*events.Sender, error) {
	s, err := events.NewSender(cfg, nil)
	if err != nil {
		return nil, err
	}
	if m != nil {
		s.Observe = m.EventSent
	}
	return s, nil
}
