package events

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// Every accepted request sends one event to the same sink, many at once: a second burst
// reuses the first one's connections instead of opening a TCP connection per event (Go's
// default transport keeps only 2 idle connections per host).
func TestSenderKeepsItsConnectionsToTheSink(t *testing.T) {
	var opened atomic.Int32
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		time.Sleep(20 * time.Millisecond) // the burst's sends overlap
		w.WriteHeader(http.StatusAccepted)
	}))
	srv.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			opened.Add(1)
		}
	}
	srv.Start()
	defer srv.Close()
	s, err := NewSender(SinkConfig{Sink: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	burst := func() {
		t.Helper()
		var wg sync.WaitGroup
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				e := cloudevents.NewEvent()
				e.SetID("id")
				e.SetSource("test")
				e.SetType("test")
				if err := s.Send(context.Background(), e); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
	}
	burst()
	first := opened.Load()
	burst()
	if again := opened.Load() - first; again != 0 {
		t.Errorf("the second burst of 20 sends opened %d new connections (the first opened %d)", again, first)
	}
}
