package e2e

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/async-helm/async-helm/internal/operator"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/progress"
)

// statusEvent finds the status event of revision rev of name with status st.
func statusEvent(evs []cloudevents.Event, name string, rev int, st string) (events.StatusChange, bool) {
	for _, e := range evs {
		var c events.StatusChange
		if e.Type() == events.TypeStatusPrefix+st && e.DataAs(&c) == nil && c.Name == name && c.Revision == rev {
			return c, true
		}
	}
	return events.StatusChange{}, false
}

// history reads GET /api/helm/release/history as the operator.
func (s *stack) historyOf(t *testing.T, ns, name string) map[int][2]string {
	t.Helper()
	var revs []api.Release
	if code := s.callAPI(t, http.MethodGet, api.PathHistory, ns, name, &revs); code != http.StatusOK {
		t.Fatalf("history of %s: HTTP %d", name, code)
	}
	out := map[int][2]string{}
	for _, r := range revs {
		out[r.Version] = [2]string{r.Info.Status.String(), r.Info.Description}
	}
	return out
}

// deployedWeb is a stack with release web of tiny 0.1.0 installed and deployed.
func deployedWeb(t *testing.T) (s *stack, ns, chart string) {
	ns = cluster.Namespace(t)
	s = newStack(t, ns)
	chart = s.charts.ChartURL("tiny", "0.1.0")
	if out, code := s.ocHelm(t, "-n", ns, "install", "web", chart, "--wait"); code != 0 {
		t.Fatalf("install: exit %d\n%s", code, out)
	}
	return s, ns, chart
}

// stuckWeb is deployedWeb with revision 2 an upgrade (--wait, 10m) whose pod never becomes
// ready, running: the executor waits on it.
func stuckWeb(t *testing.T) (s *stack, ns, chart string) {
	s, ns, chart = deployedWeb(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := s.client.Upgrade(ctx, api.ReleaseRequest{Name: "web", Namespace: ns, ChartURL: chart, Wait: true, Timeout: "10m",
		Values: map[string]any{"podAnnotations": map[string]any{"async-helm.io/simulate": "stuck"}}}); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(250 * time.Millisecond) {
		if p := s.getRelease(t, ns, "web").Progress; p != nil && p.Phase == progress.PhaseWaiting {
			t.Logf("revision 2 stuck: %s", p)
			return s, ns, chart
		}
		if time.Now().After(deadline) {
			t.Fatalf("revision 2 never waited: %+v", s.getRelease(t, ns, "web").Info)
		}
	}
}

// A rollback supersedes the stuck upgrade as an upgrade does: revision 3 rolls back to 1.
func TestSupersedeStuckUpgradeByRollback(t *testing.T) {
	t.Parallel()
	s, ns, _ := stuckWeb(t)
	out, code := s.ocHelm(t, "-n", ns, "rollback", "web", "1", "--supersede", "--wait", "--timeout", "2m")
	if code != 0 || !strings.Contains(out, "web: deployed, revision 3") {
		t.Fatalf("rollback --supersede --wait: exit %d\n%s", code, out)
	}
	h := s.historyOf(t, ns, "web")
	if h[2][0] != "failed" || !strings.Contains(h[2][1], "superseded by revision 3") || h[3] != [2]string{"deployed", "Rollback to 1"} {
		t.Errorf("history: %v", h)
	}
	t.Logf("revision 2: %q; revision 3: %v", h[2][1], h[3])
}

// An upgrade stuck in --wait on a pod that never becomes ready is superseded by a fixed
// one: `oc helm upgrade --supersede --wait` cancels it, runs the fix once it has ended, and
// ends deployed; history and the status events show both outcomes.
func TestSupersedeStuckUpgrade(t *testing.T) {
	t.Parallel()
	s, ns, chart := stuckWeb(t)
	// Without --supersede the fix is refused while revision 2 runs.
	if out, code := s.ocHelm(t, "-n", ns, "upgrade", "web", chart); code == 0 || !strings.Contains(out, "(HTTP 409)") {
		t.Fatalf("upgrade without --supersede: exit %d\n%s", code, out)
	}
	// The fix sets the annotation to another value: Helm's three-way merge of an upgrade
	// after a failed one starts from the deployed revision's manifest, so a field only the
	// superseded revision added stays unless the fix sets it (helm upgrade does the same).
	start := time.Now()
	out, code := s.ocHelm(t, "-n", ns, "upgrade", "web", chart, "--supersede", "--wait", "--timeout", "2m",
		"--set", `podAnnotations.async-helm\.io/simulate=fixed`)
	if code != 0 || !strings.Contains(out, "web: deployed, revision 3") {
		t.Fatalf("upgrade --supersede --wait: exit %d\n%s", code, out)
	}
	t.Logf("upgrade --supersede --wait took %s:\n%s", time.Since(start).Round(10*time.Millisecond), out)

	h := s.historyOf(t, ns, "web")
	if h[2][0] != "failed" || !strings.Contains(h[2][1], "cancelled by "+operator.User+": superseded by revision 3, request ") ||
		h[3][0] != "deployed" || h[1][0] != "superseded" {
		t.Errorf("history: %v", h)
	}
	t.Logf("revision 2: %s %q; revision 3: %s", h[2][0], h[2][1], h[3][0])
	out, code = s.ocHelm(t, "-n", ns, "history", "web")
	if code != 0 || !regexpLine(out, "2", "failed", "superseded by revision 3") || !regexpLine(out, "3", "deployed") {
		t.Errorf("oc helm history: exit %d\n%s", code, out)
	}
	t.Logf("oc helm history web:\n%s", out)
	if out, code := helmCLI(t, ns, "history", "web"); code != 0 || !regexpLine(out, "2", "failed", "superseded by revision 3") {
		t.Errorf("helm history: exit %d\n%s", code, out)
	}
	// The notifier reports both: revision 2 failed with the reason, then 3 deployed.
	evs := s.sink.WaitFor(t, 30*time.Second, "revision 2 failed and revision 3 deployed", func(evs []cloudevents.Event) bool {
		_, failed := statusEvent(evs, "web", 2, "failed")
		_, deployed := statusEvent(evs, "web", 3, "deployed")
		return failed && deployed
	})
	if c, _ := statusEvent(evs, "web", 2, "failed"); !strings.Contains(c.Reason, "superseded by revision 3") {
		t.Errorf("failed event of revision 2: reason %q", c.Reason)
	}
}

// A revision no executor has started is failed at once by the supersede, and the new one
// runs once the executor is back; the old one never runs.
func TestSupersedeQueuedUpgrade(t *testing.T) {
	t.Parallel()
	s, ns, chart := deployedWeb(t)
	s.executor.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if _, err := s.client.Upgrade(ctx, api.ReleaseRequest{Name: "web", Namespace: ns, ChartURL: chart,
		Values: map[string]any{"message": "never"}}); err != nil {
		t.Fatal(err)
	}
	out, code := s.ocHelm(t, "-n", ns, "upgrade", "web", chart, "--supersede", "--set", "message=fixed")
	if code != 0 || !strings.Contains(out, "REVISION: 3") {
		t.Fatalf("upgrade --supersede of a queued revision: exit %d\n%s", code, out)
	}
	h := s.historyOf(t, ns, "web")
	if h[2][0] != "failed" || !strings.Contains(h[2][1], "superseded by revision 3") || !strings.Contains(h[2][1], "no executor had started it") ||
		h[3][0] != "pending-upgrade" {
		t.Fatalf("history at once: %v", h)
	}
	t.Logf("revision 2 at once: %s %q", h[2][0], h[2][1])
	if err := s.executor.Restart(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(3 * time.Minute); s.getRelease(t, ns, "web").Info.Status.String() != "deployed"; time.Sleep(500 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("revision 3 never deployed: %v", s.historyOf(t, ns, "web"))
		}
	}
	rel := s.getRelease(t, ns, "web")
	if rel.Version != 3 || rel.Config["message"] != "fixed" {
		t.Errorf("deployed: revision %d, values %v", rel.Version, rel.Config)
	}
	// Revision 2's redelivered event found it final: its description is still submit's.
	if h := s.historyOf(t, ns, "web"); !strings.Contains(h[2][1], "no executor had started it") || h[2][0] != "failed" {
		t.Errorf("revision 2 after the executor came back: %q", h[2])
	}
	s.sink.WaitFor(t, 30*time.Second, "revision 2 failed and revision 3 deployed", func(evs []cloudevents.Event) bool {
		c, failed := statusEvent(evs, "web", 2, "failed")
		_, deployed := statusEvent(evs, "web", 3, "deployed")
		return failed && deployed && strings.Contains(c.Reason, "superseded by revision 3")
	})
}
