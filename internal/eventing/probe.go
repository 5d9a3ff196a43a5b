package eventing

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// DropProbe deletes the probe Trigger and waits until the channel's dispatcher reports the
// same subscribers as the channel's spec, so the Broker fans each event out as a cluster with
// config/knative's Triggers alone would. Only for a namespace with no events in flight (a
// delivery to the deleted Trigger would go to dead letters).
func (w *Wiring) DropProbe(ctx context.Context, timeout time.Duration) error {
	err := w.dyn.Resource(TriggerGVR).Namespace(w.ns).Delete(ctx, probeTrigger, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete the probe Trigger: %w", err)
	}
	imc := w.broker + "-kne-trigger"
	deadline := time.Now().Add(timeout)
	for {
		u, err := w.dyn.Resource(imcGVR).Namespace(w.ns).Get(ctx, imc, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("read channel %s: %w", imc, err)
		}
		if spec, status := subscriberUIDs(u, "spec"), subscriberUIDs(u, "status"); spec.n == len(w.Triggers) && spec == status {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("channel %s/%s still fans out to the probe after %s", w.ns, imc, timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// uidSet is a channel's subscribers under one field: their count and sorted uids.
type uidSet struct {
	n    int
	uids string
}

// subscriberUIDs reads the subscribers of a channel under field (spec or status).
func subscriberUIDs(u *unstructured.Unstructured, field string) uidSet {
	subs, _, _ := unstructured.NestedSlice(u.Object, field, "subscribers")
	uids := make([]string, 0, len(subs))
	for _, s := range subs {
		if m, ok := s.(map[string]any); ok {
			uid, _ := m["uid"].(string)
			uids = append(uids, uid)
		}
	}
	sort.Strings(uids)
	return uidSet{n: len(uids), uids: strings.Join(uids, ",")}
}
