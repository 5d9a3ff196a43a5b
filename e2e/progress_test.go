package e2e

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
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

func (s *stack) callAPI(t *testing.T, method, path, ns, name string, out any) int {
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

// A stuck install: the tiny chart's pod carries async-helm.io/simulate: stuck, so the local
// cluster's kwok runs it without ever making it ready and raises a Warning (Unhealthy), as a
// kubelet whose readiness probe fails. What it waits on and the Warning reach the API, the
// progress event and oc-helm; `oc helm cancel` ends it failed within 10 s with who cancelled
// it, and the helm CLI agrees.
func TestStuckInstallShowsProgressAndCancels(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	s := newStack(t, ns)
	// A user installs it with --wait on a terminal (a pseudo-terminal here).
	install := s.ocHelmPty(t, 100, "-n", ns, "install", "stuck", s.charts.ChartURL("tiny", "0.1.0"),
		"--set", `podAnnotations.async-helm\.io/simulate=stuck`, "--timeout", "10m", "--wait")
	for deadline := time.Now().Add(30 * time.Second); s.getRelease(t, ns, "stuck").Release == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			out, code := install()
			t.Fatalf("the install was not accepted: exit %d\n%s", code, out)
		}
	}
	// Another follows it with plain lines (not a terminal), as a pipeline's log would.
	watch := s.ocHelmStart(t, "-n", ns, "status", "stuck", "--watch")

	// The Job's pod completes; the Deployment's pod never becomes ready.
	var seen *progress.Progress
	for deadline := time.Now().Add(60 * time.Second); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		rel := s.getRelease(t, ns, "stuck")
		if p := rel.Progress; p != nil && p.Phase == progress.PhaseWaiting && p.Total == 2 && p.Ready == 1 &&
			strings.Join(p.WaitingFor, ",") == "Deployment/stuck" && hasWarning(p.Warnings) {
			seen = p
			break
		}
	}
	if seen == nil {
		p := s.getRelease(t, ns, "stuck").Progress
		t.Fatalf("the API never showed the stuck Deployment and its warning: %v %q", p, p.Warnings)
	}
	t.Logf("progress: %s; warnings %q", seen, seen.Warnings)
	// The notifier reports it as an event (through the Broker's event-log Trigger).
	s.sink.WaitFor(t, 20*time.Second, "a progress event naming the stuck Deployment and the warning", func(evs []cloudevents.Event) bool {
		for _, e := range evs {
			var c events.ProgressChange
			if e.Type() == events.TypeProgress && e.DataAs(&c) == nil && c.Name == "stuck" &&
				strings.Join(c.Progress.WaitingFor, ",") == "Deployment/stuck" && hasWarning(c.Progress.Warnings) {
				return true
			}
		}
		return false
	})
	// `oc helm status` prints the progress block.
	out, code := s.ocHelm(t, "-n", ns, "status", "stuck")
	for _, want := range []string{"STATUS: pending-install", "PHASE: waiting", "READY: 1/2", "WAITING FOR: Deployment/stuck", "WARNINGS:", stuckWarning} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("status (exit %d) lacks %q:\n%s", code, want, out)
		}
	}

	start := time.Now()
	out, code = s.ocHelm(t, "-n", ns, "cancel", "stuck", "--wait")
	took := time.Since(start)
	if code != 0 || !strings.HasPrefix(out, "stuck: revision 1 cancelling\n") ||
		!regexpLine(out, "stuck: failed, revision 1 (", "): ", "cancelled by "+operator.User) {
		t.Fatalf("cancel --wait: exit %d\n%s", code, out)
	}
	if took > 10*time.Second {
		t.Errorf("cancel --wait took %s, want within 10 s", took)
	}
	t.Logf("cancel --wait took %s:\n%s", took.Round(10*time.Millisecond), out)
	rel := s.getRelease(t, ns, "stuck")
	if rel.Info.Status.String() != "failed" || !strings.Contains(rel.Info.Description, "cancelled by "+operator.User) || rel.Progress != nil {
		t.Errorf("after the cancel: %s %q, progress %v", rel.Info.Status, rel.Info.Description, rel.Progress)
	}

	// The follower saw it all, one line per change, and exits 1 on the failure.
	out, code = watch()
	for _, want := range [][]string{
		{"stuck: pending-install, revision 1: waiting, 1/2 ready, waiting for Deployment/stuck ("},
		{"stuck: warning: Pod/stuck-", ": " + stuckWarning},
		{"stuck: failed, revision 1 (", "cancelled by " + operator.User},
	} {
		if !regexpLine(out, want...) {
			t.Errorf("status --watch lacks a line with %q:\n%s", want, out)
		}
	}
	if code != 1 || strings.Count(out, stuckWarning) != 1 {
		t.Errorf("status --watch: exit %d, want 1; the warning once:\n%s", code, out)
	}

	// The failed status event gives the same reason: no "context canceled" alone first.
	evs := s.sink.WaitFor(t, 20*time.Second, "the failed status event of stuck", func(evs []cloudevents.Event) bool {
		for _, e := range evs {
			var c events.StatusChange
			if e.Type() == events.TypeStatusPrefix+"failed" && e.DataAs(&c) == nil && c.Name == "stuck" {
				return true
			}
		}
		return false
	})
	for _, e := range evs {
		var c events.StatusChange
		if e.Type() == events.TypeStatusPrefix+"failed" && e.DataAs(&c) == nil && c.Name == "stuck" && !strings.Contains(c.Reason, "cancelled by "+operator.User) {
			t.Errorf("failed event %s: reason %q", e.ID(), c.Reason)
		}
	}

	// The terminal showed the bar stuck at 1/2, redrawn in place, the warning above it, and
	// the failure with its reason at the end.
	out, code = install()
	frame := regexp.MustCompile(`\r\x1b\[K[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏] stuck \[█{10}░{10}\] 1/2 waiting  [0-9hms]+  waiting for Deployment/stuck`)
	if n := len(frame.FindAllString(out, -1)); code != 1 || n == 0 ||
		!regexpLine(out, "\r\x1b[Kwarning: Pod/stuck-", ": "+stuckWarning) ||
		!regexpLine(out, "\r\x1b[Kstuck: failed, revision 1 (", "cancelled by "+operator.User) {
		t.Errorf("install --wait on a terminal: exit %d, %d frames at 1/2:\n%q", code, n, out)
	} else {
		t.Logf("install --wait on a terminal: %d frames at 1/2, exit %d", n, code)
	}

	// Helm's own CLI reads the same record.
	out, code = helmCLI(t, ns, "list", "-a")
	if code != 0 || !regexpLine(out, "stuck", ns, "1", "failed", "tiny-0.1.0") {
		t.Errorf("helm list -a: exit %d\n%s", code, out)
	}
	// Nothing is left to cancel.
	if out, code := s.ocHelm(t, "-n", ns, "cancel", "stuck"); code == 0 || !strings.Contains(out, "(HTTP 409)") || !strings.Contains(out, "nothing to cancel") {
		t.Errorf("cancel of a final revision: exit %d\n%s", code, out)
	}
}

// stuckWarning is the tail of the Warning the local cluster raises for a stuck pod.
const stuckWarning = "Unhealthy: Readiness probe failed: connection refused (async-helm.io/simulate: stuck)"

func hasWarning(ws []string) bool {
	for _, w := range ws {
		if strings.HasPrefix(w, "Pod/stuck-") && strings.HasSuffix(w, ": "+stuckWarning) {
			return true
		}
	}
	return false
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
	if out, code := s.ocHelm(t, "-n", ns, "cancel", "queued", "--wait"); code != 0 || out != "queued: revision 1 failed (not started)\n" {
		t.Fatalf("cancel: exit %d\n%s", code, out)
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
