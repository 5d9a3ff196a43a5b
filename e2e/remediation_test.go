package e2e

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// Retries and remediation through the built oc-helm (docs/design.md, "Retries and
// remediation"). The flaky chart's post-install/post-upgrade hook Job fails until the hook
// has run succeedFrom times: an install with --retries 3 fails at revisions 1 and 2 and is
// deployed by its third attempt, revision 3, all under one request id; then an
// upgrade that fails with --remediation rollback ends with revision 3's release deployed
// again as revision 5, the failed attempt kept in history; an install whose attempts all
// fail with --remediation uninstall leaves nothing.
func TestOcHelmRetriesAndRemediation(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	s := newStackWith(t, unbounded, ns)
	ctx := context.Background()
	flaky := s.charts.ChartURL("flaky", "0.1.0")

	out, code := s.ocHelm(t, "-n", ns, "install", "web", flaky, "--set", "succeedFrom=3", "--retries", "3", "--timeout", "1m", "--wait")
	if code != 0 || !strings.Contains(out, "REVISION: 1") || !strings.Contains(out, "web: deployed, revision 3") {
		t.Fatalf("install --retries 3 --wait: exit %d\n%s", code, out)
	}
	waitRevision(t, s, ns, "web", 3, "deployed", 3*time.Minute)
	wantHistory(t, s, ns, "web",
		`1 failed Release "web" failed: .*BackoffLimitExceeded \(attempt 1 of 4; retried as revision 2\)$`,
		`2 failed Release "web" failed: .*BackoffLimitExceeded \(attempt 2 of 4; retried as revision 3\)$`,
		`3 deployed Install complete \(attempt 3 of 4\)$`)
	id := requestIDs(t, ns, "web", 1, 2, 3)
	s.sink.WaitFor(t, 30*time.Second, "failed v1, failed v2, deployed v3 of one request", func(e []cloudevents.Event) bool {
		f1, f2 := index(e, events.StatusEventID(ns, "web", 1, "failed", id)), index(e, events.StatusEventID(ns, "web", 2, "failed", id))
		d3 := index(e, events.StatusEventID(ns, "web", 3, "deployed", id))
		return f1 >= 0 && f2 > f1 && d3 > f2
	})

	// What cannot be asked: 400 before anything is reserved; a bound oc-helm knows is
	// refused before any call, as helm refuses bad flags.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"install", "other", flaky, "--remediation", "rollback"}, "(HTTP 400)"},
		{[]string{"upgrade", "web", flaky, "--atomic", "--retries", "1"}, "(HTTP 400)"},
		{[]string{"upgrade", "web", flaky, "--retries", "11"}, "--retries 11: want 0 to 10"},
	} {
		if out, code := s.ocHelm(t, append([]string{"-n", ns}, tc.args...)...); code == 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, want %q\n%s", tc.args, code, tc.want, out)
		}
	}

	out, code = s.ocHelm(t, "-n", ns, "upgrade", "web", flaky, "--set", "succeedFrom=99", "--set", "message=two",
		"--remediation", "rollback", "--timeout", "1m", "--wait")
	if code == 0 || !strings.Contains(out, "REVISION: 4") || !strings.Contains(out, "release failed: web revision 5 is deployed: Rollback to 3") {
		t.Fatalf("upgrade --remediation rollback --wait: exit %d (want 1)\n%s", code, out)
	}
	waitRevision(t, s, ns, "web", 5, "deployed", 3*time.Minute)
	wantHistory(t, s, ns, "web",
		`1 failed .*\(attempt 1 of 4; retried as revision 2\)$`,
		`2 failed .*\(attempt 2 of 4; retried as revision 3\)$`,
		`3 superseded Install complete \(attempt 3 of 4\)$`,
		`4 failed Upgrade "web" failed: .*BackoffLimitExceeded \(attempt 1 of 1; remediated by rollback to 3 as revision 5\)$`,
		`5 deployed Rollback to 3$`)
	requestIDs(t, ns, "web", 4, 5)
	cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "web-config", metav1.GetOptions{})
	if err != nil || cm.Data["message"] != "hello" {
		t.Errorf("the ConfigMap after the rollback: %v %v", cm.Data, err)
	}

	// An install whose every attempt fails, with --remediation uninstall: the release is gone.
	out, code = s.ocHelm(t, "-n", ns, "install", "gone", flaky, "--set", "succeedFrom=99", "--retries", "1",
		"--remediation", "uninstall", "--timeout", "1m", "--wait")
	if code == 0 || !strings.Contains(out, "release failed: gone was uninstalled (remediated by uninstall)") {
		t.Fatalf("install --remediation uninstall --wait: exit %d (want 1)\n%s", code, out)
	}
	if _, err := s.client.Get(ctx, ns, "gone"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("the uninstalled release: %v", err)
	}
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "gone-config", metav1.GetOptions{}); err == nil {
		t.Error("the uninstalled release's ConfigMap is still there")
	}
	// Reported as a hand-run helm uninstall is: from the deletion of the revision Helm marked.
	s.sink.WaitFor(t, 30*time.Second, "uninstalled of gone", func(evs []cloudevents.Event) bool {
		for _, e := range evs {
			if e.Subject() == ns+"/gone" && e.Type() == events.TypeStatusPrefix+events.StatusUninstalled {
				return true
			}
		}
		return false
	})
}

// waitRevision waits until the release's latest revision is rev with status.
func waitRevision(t *testing.T, s *stack, ns, name string, rev int, status string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		rel, err := s.client.Get(context.Background(), ns, name)
		if err == nil && rel.Version == rev && rel.Info.Status.String() == status {
			return
		}
		if time.Now().After(deadline) {
			hist, _ := s.ocHelm(t, "-n", ns, "history", name)
			t.Fatalf("%s/%s not revision %d %s after %s: %v\n%s", ns, name, rev, status, within, err, hist)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// wantHistory checks each revision's "version status description" against a pattern.
func wantHistory(t *testing.T, s *stack, ns, name string, patterns ...string) {
	t.Helper()
	hist, err := s.client.History(context.Background(), ns, name)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(hist, func(i, j int) bool { return hist[i].Version < hist[j].Version })
	var got []string
	for _, r := range hist {
		got = append(got, fmt.Sprintf("%d %s %s", r.Version, r.Info.Status, r.Info.Description))
	}
	if len(got) != len(patterns) {
		t.Fatalf("history:\n%s\nwant %d revisions", strings.Join(got, "\n"), len(patterns))
	}
	for i, p := range patterns {
		if !regexp.MustCompile("(?s)" + p).MatchString(got[i]) {
			t.Errorf("revision %q does not match %q", got[i], p)
		}
	}
}

// requestIDs checks that the revisions carry one request id, and answers it.
func requestIDs(t *testing.T, ns, name string, revs ...int) string {
	t.Helper()
	var id string
	for _, v := range revs {
		sec, err := cluster.Client.CoreV1().Secrets(ns).Get(context.Background(), release.SecretName(name, v), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got := sec.Labels[release.LabelRequestID]
		if got == "" || (id != "" && got != id) || sec.Labels[release.LabelRevision] != fmt.Sprint(v) {
			t.Errorf("revision %d: labels %v, want request %q", v, sec.Labels, id)
		}
		id = got
	}
	return id
}
