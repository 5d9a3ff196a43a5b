package events

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
)

// gateSink blocks each send until released and answers err.
type gateSink struct {
	mu   sync.Mutex
	err  error
	gate chan struct{}
	sent []string
}

func (g *gateSink) Send(ctx context.Context, e cloudevents.Event) error {
	g.mu.Lock()
	gate := g.gate
	g.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.err == nil {
		g.sent = append(g.sent, e.ID())
	}
	return g.err
}

func (g *gateSink) setErr(err error) { g.mu.Lock(); g.err = err; g.mu.Unlock() }

func (g *gateSink) hold() chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.gate = make(chan struct{})
	return g.gate
}

func (g *gateSink) ids() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.sent...)
}

func event(id string) cloudevents.Event {
	e := cloudevents.NewEvent()
	e.SetID(id)
	e.SetType("t")
	e.SetSource("s")
	return e
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !ok(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
	}
}

// Before the sink's first acknowledgement a send is the caller's (its error is the
// caller's); once the sink answered, sends go behind the answer; a failed background send
// puts the next send back on the caller's path, so a sink that went down is told.
func TestHandoffSendsBehindTheAnswerOnlyWhileTheSinkAnswers(t *testing.T) {
	sink := &gateSink{err: errors.New("broker down")}
	h := NewHandoff(sink, HandoffOptions{Queue: 4, Workers: 1})
	defer h.Drain(context.Background())
	ctx := context.Background()
	if err := h.Send(ctx, event("1")); err == nil {
		t.Fatal("the first send, to a sink that is down, reported no error")
	}
	sink.setErr(nil)
	if err := h.Send(ctx, event("2")); err != nil {
		t.Fatalf("send to a sink that is back: %v", err)
	}
	gate := sink.hold() // the sink now takes its time
	start := time.Now()
	if err := h.Send(ctx, event("3")); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("a send behind the answer took %s", d)
	}
	sink.setErr(errors.New("broker down again"))
	close(gate) // event 3 fails in the background
	eventually(t, "the background failure marks the sink down", func() bool { return !h.healthy.Load() })
	if err := h.Send(ctx, event("4")); err == nil {
		t.Error("a send after a failed background send reported no error")
	}
	if got := sink.ids(); len(got) != 1 || got[0] != "2" {
		t.Errorf("delivered %v, want only 2", got)
	}
}

// A full queue sends on the caller's path (backpressure, never a dropped event), and Drain
// sends what is queued.
func TestHandoffFullQueueAndDrain(t *testing.T) {
	sink := &gateSink{}
	h := NewHandoff(sink, HandoffOptions{Queue: 1, Workers: 1})
	ctx := context.Background()
	if err := h.Send(ctx, event("warm")); err != nil {
		t.Fatal(err)
	}
	gate := sink.hold()
	_ = h.Send(ctx, event("a")) // taken by the worker, which blocks
	eventually(t, "the worker took a", func() bool { return len(h.queue) == 0 })
	_ = h.Send(ctx, event("b")) // queued
	done := make(chan error, 1)
	go func() { done <- h.Send(ctx, event("c")) }() // queue full: the caller's own send
	select {
	case <-done:
		t.Fatal("a send with a full queue returned before the sink answered")
	case <-time.After(50 * time.Millisecond):
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.Drain(ctx)
	got := map[string]bool{}
	for _, id := range sink.ids() {
		got[id] = true
	}
	for _, id := range []string{"warm", "a", "b", "c"} {
		if !got[id] {
			t.Errorf("%s was not delivered (delivered %v)", id, sink.ids())
		}
	}
	if err := h.Send(ctx, event("after")); err != nil {
		t.Errorf("a send after Drain: %v", err)
	}
}

// The queue is bounded in bytes too (32 MiB by default): past it, counting the data in
// flight, a send is the caller's own, so a burst of large values waits for the sink
// instead of piling up in submit.
func TestHandoffQueueIsBoundedInBytes(t *testing.T) {
	sink := &gateSink{}
	h := NewHandoff(sink, HandoffOptions{Queue: 1024, Workers: 1})
	ctx := context.Background()
	if err := h.Send(ctx, event("warm")); err != nil {
		t.Fatal(err)
	}
	gate := sink.hold()
	big := func(id string) cloudevents.Event {
		e := event(id)
		_ = e.SetData("application/octet-stream", make([]byte, 1<<20))
		return e
	}
	for i := range 32 { // 32 MiB: one in the worker's send, the rest queued
		if err := h.Send(ctx, big(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- h.Send(ctx, big("over")) }()
	select {
	case <-done:
		t.Fatal("a send past the queue's 32 MiB returned before the sink answered")
	case <-time.After(100 * time.Millisecond):
	}
	close(gate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	h.Drain(ctx)
	if n := len(sink.ids()); n != 34 {
		t.Errorf("delivered %d events, want 34", n)
	}
	if b := h.bytes.Load(); b != 0 {
		t.Errorf("%d bytes still counted after the drain", b)
	}
}
