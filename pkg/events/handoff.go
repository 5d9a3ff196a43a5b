package events

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"go.uber.org/zap"
)

// Sink delivers one event; nil: the sink acknowledged it (*Sender; a Handoff's, the notifier's).
type Sink interface {
	Send(ctx context.Context, e cloudevents.Event) error
}

// HandoffOptions size a Handoff.
type HandoffOptions struct {
	// Queue bounds the events waiting for a background send; Workers send them.
	Queue, Workers int
	// QueueBytes bounds the same events' data, in flight included (a burst of large
	// values must not hold the submit's memory): default 32 MiB.
	QueueBytes int64
	// Timeout bounds one background send (the Sink's retries included).
	Timeout time.Duration
	Log     *zap.SugaredLogger
}

// Handoff sends events whose work is already recorded durably (submit's reservation holds
// the signed event, and the sweeper re-sends a queued one) behind the caller's answer while
// the sink is healthy, and on the caller's path otherwise: before the sink's first
// acknowledgement, after a failed send, and when the queue is full. So a sink that is down
// is told to the next caller (its Send fails), and a burst does not wait for the Broker.
// Only for such events: Send returning nil means "sent, or queued while the sink answered".
type Handoff struct {
	sink    Sink
	o       HandoffOptions
	healthy atomic.Bool
	mu      sync.RWMutex // guards queue against a send after Drain closed it
	closed  bool
	queue   chan cloudevents.Event
	bytes   atomic.Int64 // data of the events queued or in a background send
	done    sync.WaitGroup
}

// NewHandoff starts o.Workers background senders to sink.
func NewHandoff(sink Sink, o HandoffOptions) *Handoff {
	if o.Queue <= 0 {
		o.Queue = 1024
	}
	if o.Workers <= 0 {
		o.Workers = 64
	}
	if o.Timeout <= 0 {
		o.Timeout = 30 * time.Second
	}
	if o.QueueBytes <= 0 {
		o.QueueBytes = 32 << 20
	}
	if o.Log == nil {
		o.Log = zap.NewNop().Sugar()
	}
	h := &Handoff{sink: sink, o: o, queue: make(chan cloudevents.Event, o.Queue)}
	h.done.Add(o.Workers)
	for range o.Workers {
		go h.work()
	}
	return h
}

// Send queues e for a background send while the sink acknowledged the last send and the
// queue has room, in events and in bytes; otherwise it sends e itself and returns the
// sink's answer.
func (h *Handoff) Send(ctx context.Context, e cloudevents.Event) error {
	if h.offer(e) {
		return nil
	}
	err := h.sink.Send(ctx, e)
	h.healthy.Store(err == nil)
	return err
}

func (h *Handoff) offer(e cloudevents.Event) bool {
	if !h.healthy.Load() {
		return false
	}
	h.mu.RLock()
	defer h.mu.RUnlock()
	if h.closed {
		return false
	}
	size := int64(len(e.Data()))
	if h.bytes.Add(size) > h.o.QueueBytes {
		h.bytes.Add(-size)
		return false
	}
	select {
	case h.queue <- e:
		return true
	default:
		h.bytes.Add(-size)
		return false
	}
}

func (h *Handoff) work() {
	defer h.done.Done()
	for e := range h.queue {
		ctx, cancel := context.WithTimeout(context.Background(), h.o.Timeout)
		err := h.sink.Send(ctx, e)
		cancel()
		h.bytes.Add(-int64(len(e.Data())))
		h.healthy.Store(err == nil)
		if err != nil {
			h.o.Log.Warnw("event not delivered behind its answer; the sweeper re-sends it from its reservation",
				"id", e.ID(), "type", e.Type(), "subject", e.Subject(), "error", err)
		}
	}
}

// Drain stops taking events and waits until the queued ones are sent or ctx ends; what is
// left then is the sweeper's. Send goes on working, on the caller's path.
func (h *Handoff) Drain(ctx context.Context) {
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.queue)
	}
	h.mu.Unlock()
	finished := make(chan struct{})
	go func() { h.done.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-ctx.Done():
		h.o.Log.Warnw("shutdown before every queued event was sent; the sweeper re-sends the rest", "left", len(h.queue))
	}
}
