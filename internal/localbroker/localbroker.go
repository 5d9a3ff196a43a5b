// Package localbroker stands in for a Knative Broker + Trigger on one machine: it
// acknowledges an event at once (202) and delivers it to its subscriber in the background,
// retrying with exponential backoff as a Trigger's delivery spec does, and hands what it
// gives up on to a dead-letter sink, as the Trigger's deadLetterSink.
package localbroker

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/async-helm/async-helm/pkg/function"
)

// Broker delivers every event it receives to Subscriber.
type Broker struct {
	Subscriber string
	// DeadLetter, when set, receives the events whose retries ran out.
	DeadLetter string
	Retries    int
	Backoff    time.Duration
	MaxBackoff time.Duration
	// Logf reports dead letters and redeliveries.
	Logf func(format string, args ...interface{})

	client   cloudevents.Client
	handler  http.Handler
	ctx      context.Context
	inFlight atomic.Int64
}

// New builds a broker that delivers until ctx ends.
func New(ctx context.Context, subscriber string) (*Broker, error) {
	b := &Broker{Subscriber: subscriber, Retries: 12, Backoff: 200 * time.Millisecond, MaxBackoff: 10 * time.Second,
		ctx: ctx, Logf: func(string, ...interface{}) {}}
	out, err := cloudevents.NewHTTP(cehttp.WithClient(http.Client{Timeout: 2 * time.Hour}))
	if err != nil {
		return nil, err
	}
	if b.client, err = cloudevents.NewClient(out); err != nil {
		return nil, err
	}
	b.handler = function.EventHandler(func(_ context.Context, e cloudevents.Event) (*cloudevents.Event, cloudevents.Result) {
		b.inFlight.Add(1)
		go b.deliver(e)
		return nil, cloudevents.NewHTTPResult(http.StatusAccepted, "queued")
	})
	return b, nil
}

// ServeHTTP is the broker's ingress.
func (b *Broker) ServeHTTP(w http.ResponseWriter, r *http.Request) { b.handler.ServeHTTP(w, r) }

// InFlight is how many events are being delivered or retried.
func (b *Broker) InFlight() int64 { return b.inFlight.Load() }

func (b *Broker) deliver(e cloudevents.Event) {
	defer b.inFlight.Add(-1)
	backoff, code := b.Backoff, 0
	for attempt := 0; attempt <= b.Retries; attempt++ {
		res := b.client.Send(cloudevents.ContextWithTarget(b.ctx, b.Subscriber), e)
		if cloudevents.IsACK(res) {
			return
		}
		var hr *cehttp.Result
		if cloudevents.ResultAs(res, &hr) {
			code = hr.StatusCode
		}
		b.Logf("delivery %d of %s %s failed: %v", attempt+1, e.Type(), e.ID(), res)
		if attempt == b.Retries {
			break
		}
		select {
		case <-b.ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff *= 2; backoff > b.MaxBackoff {
			backoff = b.MaxBackoff
		}
	}
	b.Logf("dead letter: %s %s after %d attempts", e.Type(), e.ID(), b.Retries+1)
	if b.DeadLetter == "" {
		return
	}
	// As Knative does: the original event, with the error code as an extension.
	e.SetExtension("knativeerrorcode", code)
	for i := 0; i < 5; i++ {
		if res := b.client.Send(cloudevents.ContextWithTarget(b.ctx, b.DeadLetter), e); cloudevents.IsACK(res) {
			return
		} else if b.ctx.Err() != nil {
			return
		}
		time.Sleep(time.Second)
	}
	b.Logf("dead-letter sink refused %s %s", e.Type(), e.ID())
}
