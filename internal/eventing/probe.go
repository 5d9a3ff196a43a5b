package eventing

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const (
	probeTrigger = "local-wiring-probe"
	probeType    = "dev.asynchelm.local.probe"
)

// probe proves the data plane has the namespace's current Subscriptions. A Trigger is Ready
// once its Subscription is in the channel's spec, which can be before the InMemoryChannel
// dispatcher has taken the change (seen: an event sent right after every Trigger was Ready
// was dropped with 202, as a channel without subscribers drops it). probe adds one more
// Trigger, delivering to a receiver of its own, and sends events until one arrives: the
// dispatcher then holds the channel's subscriber list as it was after the last change.
func (w *Wiring) probe(ctx context.Context, broker string, deadline time.Time) error {
	got := make(chan struct{}, 1)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		select {
		case got <- struct{}{}:
		default:
		}
		rw.WriteHeader(http.StatusAccepted)
	})}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	t := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eventing.knative.dev/v1", "kind": "Trigger",
		"metadata": map[string]any{"name": probeTrigger, "namespace": w.ns},
		"spec": map[string]any{
			"broker":     broker,
			"filter":     map[string]any{"attributes": map[string]any{"type": probeType}},
			"subscriber": map[string]any{"uri": "http://" + ln.Addr().String()},
		},
	}}
	if err := w.apply(ctx, TriggerGVR, t); err != nil {
		return err
	}
	// The probe Trigger stays: deleting it while events flow makes the dispatcher's deliveries
	// to it fail, and those go to the Broker's dead-letter sink (seen: accepted events that
	// the executor had acknowledged reached the notifier's /dead-letter). It matches only
	// probe events.
	if _, err := w.waitReady(ctx, TriggerGVR, deadline, probeTrigger); err != nil {
		return err
	}
	client := &http.Client{Timeout: 5 * time.Second}
	for i := 0; ; i++ {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.BrokerURL, bytes.NewReader([]byte("{}")))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Ce-Specversion", "1.0")
		req.Header.Set("Ce-Id", "probe-"+strconv.Itoa(i))
		req.Header.Set("Ce-Source", "async-helm/internal/eventing")
		req.Header.Set("Ce-Type", probeType)
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
		select {
		case <-got:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("Broker %s/%s: no probe event came through the channel", w.ns, broker)
		}
	}
}
