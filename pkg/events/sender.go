package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// ErrUndelivered means the sink did not acknowledge an event after every retry.
var ErrUndelivered = errors.New("event not delivered")

// SinkConfig is what Knative's SinkBinding (or a ContainerSource) injects.
type SinkConfig struct {
	Sink string `envconfig:"K_SINK" required:"true"`
	// CEOverrides is JSON: {"extensions": {"name": "value"}}.
	CEOverrides string `envconfig:"K_CE_OVERRIDES"`
}

// Sender delivers events to one sink, checking every result.
type Sender struct {
	client     cloudevents.Client
	sink       string
	extensions map[string]any
	Retries    int
	Backoff    time.Duration
	// Observe, when set, is told the outcome of every send (metrics).
	Observe func(eventType string, err error)
}

// NewSender builds a sender for cfg.
func NewSender(cfg SinkConfig, hc *http.Client) (*Sender, error) {
	if hc == nil {
		hc = &http.Client{Transport: sinkTransport()}
	}
	opts := []cehttp.Option{cehttp.WithClient(*hc)}
	p, err := cloudevents.NewHTTP(opts...)
	if err != nil {
		return nil, fmt.Errorf("cloudevents http protocol: %w", err)
	}
	c, err := cloudevents.NewClient(p)
	if err != nil {
		return nil, fmt.Errorf("cloudevents client: %w", err)
	}
	s := &Sender{client: c, sink: cfg.Sink, Retries: 3, Backoff: 50 * time.Millisecond}
	if cfg.CEOverrides != "" {
		var o struct {
			Extensions map[string]any `json:"extensions"`
		}
		if err := json.Unmarshal([]byte(cfg.CEOverrides), &o); err != nil {
			return nil, fmt.Errorf("K_CE_OVERRIDES: %w", err)
		}
		s.extensions = o.Extensions
	}
	return s, nil
}

// sinkTransport keeps the connections of concurrent sends to the one sink: every accepted
// request sends an event, and Go's default transport keeps 2 idle connections per host, so
// under load almost every send opened (and left in TIME_WAIT) a TCP connection of its own.
func sinkTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns, t.MaxIdleConnsPerHost = 256, 256
	return t
}

// Send delivers e with exponential-backoff retries; it returns nil only on an ACK.
func (s *Sender) Send(ctx context.Context, e cloudevents.Event) error {
	for k, v := range s.extensions {
		e.SetExtension(k, v)
	}
	ctx = cloudevents.ContextWithTarget(ctx, s.sink)
	if s.Retries > 0 {
		ctx = cloudevents.ContextWithRetriesExponentialBackoff(ctx, s.Backoff, s.Retries)
	}
	err := s.result(e, s.client.Send(ctx, e))
	if s.Observe != nil {
		s.Observe(e.Type(), err)
	}
	return err
}

func (s *Sender) result(e cloudevents.Event, res cloudevents.Result) error {
	if cloudevents.IsACK(res) {
		return nil
	}
	var httpRes *cehttp.Result
	if cloudevents.ResultAs(res, &httpRes) {
		return fmt.Errorf("%w: %s %s to %s: status %d: %v", ErrUndelivered, e.Type(), e.ID(), s.sink, httpRes.StatusCode, res)
	}
	return fmt.Errorf("%w: %s %s to %s: %v", ErrUndelivered, e.Type(), e.ID(), s.sink, res)
}
