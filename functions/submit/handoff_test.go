package main

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// With SEND_QUEUE set, the event goes out behind the 201 while the sink answers. A sink
// that goes down is told to a caller soon (503, nothing reserved for that one), never
// hidden; a request accepted just before keeps its reservation and stored event (the
// sweeper's to re-send), and once the sink is back requests are accepted again.
func TestEventsGoBehindThe201WhileTheSinkAnswers(t *testing.T) {
	s := newStackWith(t, func(c *Config) { c.SendQueue, c.SendWorkers = 16, 2 })
	ns := cluster.Namespace(t)
	if code, _ := s.call(t, http.MethodPost, api.PathAsync, s.install("first", ns), nil); code != http.StatusCreated {
		t.Fatalf("first install: %d", code)
	}
	s.sink.WaitFor(t, 10*time.Second, "the first install's event", func(es []cloudevents.Event) bool { return len(es) == 1 })
	s.sink.Refuse(http.StatusInternalServerError)
	accepted := map[string]bool{}
	refusedAt := -1
	for i := 0; i < 50 && refusedAt < 0; i++ {
		name := fmt.Sprintf("during%d", i)
		switch code, _ := s.call(t, http.MethodPost, api.PathAsync, s.install(name, ns), nil); code {
		case http.StatusCreated:
			accepted[name] = true
			time.Sleep(100 * time.Millisecond) // its background send fails meanwhile
		case http.StatusServiceUnavailable:
			refusedAt = i
		default:
			t.Fatalf("%s: %d", name, code)
		}
	}
	if refusedAt < 0 {
		t.Fatalf("a sink that is down was never told to a caller (%d accepted)", len(accepted))
	}
	secs, err := cluster.Client.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: release.SelectorReleaseSecrets})
	if err != nil {
		t.Fatal(err)
	}
	kept := map[string]bool{}
	for _, sec := range secs.Items {
		name := sec.Labels[release.LabelName]
		kept[name] = true
		if accepted[name] && (sec.Labels[release.LabelQueued] != "true" || len(sec.Data[release.DataEvent]) == 0) {
			t.Errorf("%s was accepted but its reservation is not queued with its event: %v", name, sec.Labels)
		}
	}
	for name := range accepted {
		if !kept[name] {
			t.Errorf("%s was accepted (201) and its reservation is gone", name)
		}
	}
	if kept[fmt.Sprintf("during%d", refusedAt)] {
		t.Error("the refused request left a reservation")
	}
	t.Logf("sink down: %d accepted behind the 201 before the 503", len(accepted))
	s.sink.Refuse(0)
	if code, _ := s.call(t, http.MethodPost, api.PathAsync, s.install("after", ns), nil); code != http.StatusCreated {
		t.Fatalf("after the sink is back: %d", code)
	}
}
