// Package testsink is a CloudEvents sink on loopback that records what it receives and
// can be told to refuse deliveries, for tests of everything that emits events.
package testsink

import (
	"context"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/async-helm/async-helm/pkg/function"
)

// Sink records events.
type Sink struct {
	*httptest.Server
	mu      sync.Mutex
	events  []cloudevents.Event
	refuse  int // status to answer instead of accepting; 0 accepts
	arrived chan struct{}
	// OnEvent, when set, decides the answer to each event (the executor stand-in).
	OnEvent func(cloudevents.Event) cloudevents.Result
}

// Start serves a sink until the test ends.
func Start(t testing.TB) *Sink {
	t.Helper()
	s := &Sink{arrived: make(chan struct{}, 1)}
	s.Server = httptest.NewServer(function.EventHandler(func(ctx context.Context, e cloudevents.Event) (*cloudevents.Event, cloudevents.Result) {
		return nil, s.receive(ctx, e)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *Sink) receive(_ context.Context, e cloudevents.Event) cloudevents.Result {
	s.mu.Lock()
	refuse, on := s.refuse, s.OnEvent
	s.mu.Unlock()
	if refuse != 0 {
		return cloudevents.NewHTTPResult(refuse, "refused by test sink")
	}
	if on != nil {
		if res := on(e); !cloudevents.IsACK(res) {
			return res
		}
	}
	s.mu.Lock()
	s.events = append(s.events, e)
	s.mu.Unlock()
	select {
	case s.arrived <- struct{}{}:
	default:
	}
	return cloudevents.ResultACK
}

// Refuse makes the sink answer status to every event (0 to accept again).
func (s *Sink) Refuse(status int) {
	s.mu.Lock()
	s.refuse = status
	s.mu.Unlock()
}

// Events is a copy of what arrived, in order.
func (s *Sink) Events() []cloudevents.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]cloudevents.Event(nil), s.events...)
}

// WaitFor waits until match holds for the events so far, or fails the test after timeout.
func (s *Sink) WaitFor(t testing.TB, timeout time.Duration, what string, match func([]cloudevents.Event) bool) []cloudevents.Event {
	t.Helper()
	deadline := time.After(timeout)
	for {
		evs := s.Events()
		if match(evs) {
			return evs
		}
		select {
		case <-s.arrived:
		case <-time.After(200 * time.Millisecond):
		case <-deadline:
			t.Fatalf("timed out after %s waiting for %s; got %d events", timeout, what, len(evs))
		}
	}
}
