package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/operator"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/progress"
)

// getRelease reads GET /api/helm/release with its progress.
func (s *stack) getRelease(t *testing.T, ns, name string) api.Release {
	t.Helper()
	var out api.Release
	s.callAPI(t, http.MethodGet, api.PathRelease, ns, name, &out)
	return out
}

func (s *stack) callAPI(t *testing.T, method, path, ns, name string, out interface{}) int {
	t.Helper()
	req, err := http.NewRequest(method, s.submit.URL+path+"?"+url.Values{"ns": {ns}, "name": {name}}.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+cluster.Operator.BearerToken) // submit refuses system:masters
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("%s %s: %d: %v", method, path, resp.StatusCode, err)
	}
	return resp.StatusCode
}

// A stuck install (its pod never becomes ready, a Warning is raised) shows what it waits on
// through the API; cancelling it ends failed within 10 s with who cancelled it.
func TestStuckInstallShowsProgressAndCancels(t *testing.T) {
	t.Parallel()
	ns := cluster.SlowNamespace(t) // pods become ready only after 90 s
	s := newStack(t, ns)
	ctx := context.Background()
	if _, err := s.client.Install(ctx, api.ReleaseRequest{Name: "stuck", Namespace: ns, ChartURL: s.charts.ChartURL("tiny", "0.1.0"),
		Wait: true, Timeout: "10m"}); err != nil {
		t.Fatal(err)
	}
	// The kubelet's part: the pod's readiness probe fails.
	var pod string
	deadline := time.Now().Add(30 * time.Second)
	for pod == "" && time.Now().Before(deadline) {
		pods, err := cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(pods.Items) > 0 {
			pod = pods.Items[0].Name
		}
		time.Sleep(200 * time.Millisecond)
	}
	if pod == "" {
		t.Fatal("no pod was created")
	}
	now := metav1.Now()
	if _, err := cluster.Client.CoreV1().Events(ns).Create(ctx, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: pod + ".probe"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", Name: pod, Namespace: ns}, Type: corev1.EventTypeWarning,
		Reason: "Unhealthy", Message: "Readiness probe failed: connection refused", LastTimestamp: now, FirstTimestamp: now,
		Source: corev1.EventSource{Component: "kubelet"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var seen *progress.Progress
	for deadline = time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		rel := s.getRelease(t, ns, "stuck")
		// The tiny chart has a Deployment and a Job; neither is done while pods are not ready.
		if p := rel.Progress; p != nil && p.Phase == progress.PhaseWaiting && p.Total == 2 && p.Ready == 0 &&
			strings.Join(p.WaitingFor, ",") == "Deployment/stuck,Job/stuck-migrate-1" &&
			len(p.Warnings) > 0 && strings.Contains(p.Warnings[0], "Readiness probe failed") {
			seen = p
			break
		}
	}
	if seen == nil {
		p := s.getRelease(t, ns, "stuck").Progress
		t.Fatalf("the API never showed the stuck workloads and the warning: %v %q", p, p.Warnings)
	}
	t.Logf("progress: %s; warnings %q", seen, seen.Warnings)
	// The notifier reports it as an event too.
	s.sink.WaitFor(t, 20*time.Second, "a progress event naming the stuck workloads and the warning", func(evs []cloudevents.Event) bool {
		for _, e := range evs {
			var c events.ProgressChange
			if e.Type() == events.TypeProgress && e.DataAs(&c) == nil && c.Name == "stuck" &&
				strings.Contains(strings.Join(c.Progress.WaitingFor, ","), "Deployment/stuck") && len(c.Progress.Warnings) > 0 {
				return true
			}
		}
		return false
	})

	start := time.Now()
	var c api.Cancelled
	if code := s.callAPI(t, http.MethodPost, api.PathCancel, ns, "stuck", &c); code != http.StatusAccepted || c.Status != "cancelling" {
		t.Fatalf("cancel: %d %+v", code, c)
	}
	for {
		rel := s.getRelease(t, ns, "stuck")
		if st := rel.Info.Status.String(); st == "failed" && strings.Contains(rel.Info.Description, "cancelled by "+operator.User) {
			t.Logf("failed %s after the cancel: %s", time.Since(start).Round(10*time.Millisecond), rel.Info.Description)
			break
		}
		if time.Since(start) > 10*time.Second {
			t.Fatalf("10 s after the cancel: %s %q", rel.Info.Status, rel.Info.Description)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if code := s.callAPI(t, http.MethodPost, api.PathCancel, ns, "stuck", &api.Error{}); code != http.StatusConflict {
		t.Errorf("cancel of a final revision: %d, want 409", code)
	}
}

// A revision no executor has started is failed at once, and never runs afterwards.
func TestCancelBeforeItStarts(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	s := newStack(t, ns)
	ctx := context.Background()
	s.executor.Stop()
	if _, err := s.client.Install(ctx, api.ReleaseRequest{Name: "queued", Namespace: ns, ChartURL: s.charts.ChartURL("tiny", "0.1.0")}); err != nil {
		t.Fatal(err)
	}
	var c api.Cancelled
	if code := s.callAPI(t, http.MethodPost, api.PathCancel, ns, "queued", &c); code != http.StatusOK || c.Status != "failed" {
		t.Fatalf("cancel: %d %+v", code, c)
	}
	if err := s.executor.Restart(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(3 * time.Second) // the broker redelivers to the restarted executor meanwhile
	rel := s.getRelease(t, ns, "queued")
	if rel.Info.Status.String() != "failed" || !strings.Contains(rel.Info.Description, "cancelled by "+operator.User+" before") {
		t.Fatalf("after the cancel: %s %q", rel.Info.Status, rel.Info.Description)
	}
	if _, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, "queued", metav1.GetOptions{}); err == nil {
		t.Error("a cancelled install ran afterwards")
	}
	if _, err := cluster.Client.CoordinationV1().Leases(ns).Get(ctx, "sh.helm.release.v1.queued.v1", metav1.GetOptions{}); err == nil {
		t.Error("the cancel's lease was left behind")
	}
}
