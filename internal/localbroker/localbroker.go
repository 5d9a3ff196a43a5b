// Package localbroker stands in for a Knative Broker + Trigger on one machine: it
// acknowledges an event at once (202) and delivers it to its subscriber in the background,
// retrying with exponential backoff as a Trigger's delivery spec does. make run and the
// end-to-end tests use it so submit never waits on the executor, as on Knative.
package localbroker

import (
	"context"
	"net/http"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// Broker delivers every event it receives to Subscriber.
type Broker struct {
	Subscriber string
	Retries    int
	Backoff    time.Duration
	// Logf reports dead letters and redeliveries.
	Logf func(format string, args ...interface{})

	client  cloudevents.Client
	handler http.Handler
	ctx     context.Context
}

// New builds a broker that delivers until ctx ends.
func New(ctx context.Context, subscriber string) (*Broker, error) {
	b := &Broker{Subscriber: subscriber, Retries: 12, Backoff: 200 * time.Millisecond, ctx: ctx,
		Logf: func(string, ...interface{}) {}}
	out, err := cloudevents.NewHTTP(cehttp.WithClient(http.Client{Timeout: 2 * time.Hour}))
	if err != nil {
		return nil, err
	}
	if b.client, err = cloudevents.NewClient(out); err != nil {
		return nil, err
	}
	in, err := cloudevents.NewHTTP()
	if err != nil {
		return nil, err
	}
	b.handler, err = cloudevents.NewHTTPReceiveHandler(ctx, in, b.receive)
	return b, err
}

// ServeHTTP is the broker's ingress.
func (b *Broker) ServeHTTP(w http.ResponseWriter, r *http.Request) { b.handler.ServeHTTP(w, r) }

func (b *Broker) receive(e cloudevents.Event) cloudevents.Result {
	go b.deliver(e)
	return cloudevents.NewHTTPResult(http.StatusAccepted, "queued")
}

func (b *Broker) deliver(e cloudevents.Event) {
	backoff := b.Backoff
	for attempt := 0; attempt <= b.Retries; attempt++ {
		res := b.client.Send(cloudevents.ContextWithTarget(b.ctx, b.Subscriber), e)
		if cloudevents.IsACK(res) {
			return
		}
		b.Logf("delivery %d of %s %s failed: %v", attempt+1, e.Type(), e.ID(), res)
		select {
		case <-b.ctx.Done():
			return
		case <-time.After(backoff):
		}
		if backoff *= 2; backoff > 10*time.Second {
			backoff = 10 * time.Second
		}
	}
	b.Logf("dead letter: %s %s after %d attempts", e.Type(), e.ID(), b.Retries+1)
}
