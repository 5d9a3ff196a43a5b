package e2e

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/testcharts"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/progress"
)

// The product's acceptance story: the GitLab chart takes minutes to install (the local
// cluster's gitlab pod profile); the client gets 201 at once and watches pending-install turn
// into deployed while progress names what it waits on, then upgrades.
//
// The install is sent before t.Parallel: its pods' minutes pass while the serial tests run
// and this test waits for a parallel slot (go test resumes paused tests in no set order), so
// the package's longest story does not start last.
func TestGitLabChartInstallAndUpgradeUnderSlowPods(t *testing.T) {
	ns := cluster.GitLabNamespace(t)
	s := newStack(t, ns)
	ctx := context.Background()
	values := testcharts.Values(t, "gitlab-values-offline.yaml")
	// Nothing on the local cluster hands out load-balancer addresses, and Helm's wait holds
	// for them: expose the chart's ingress controller as a NodePort here.
	values["nginx-ingress"] = map[string]any{"controller": map[string]any{"service": map[string]any{"type": "NodePort"}}}
	// One webservice pod (the chart's default is two): fewer pods to simulate.
	values["gitlab"].(map[string]any)["webservice"] = map[string]any{"minReplicas": 1}
	// The chart makes cluster-scoped objects named after the release: a name of its own per
	// run, and those objects removed afterwards (deleting the namespace does not).
	name := "gitlab-" + ns[len(ns)-6:]
	t.Cleanup(func() { deleteClusterScoped(t, ns) })
	req := api.ReleaseRequest{Name: name, Namespace: ns, ChartURL: s.charts.ChartURL("gitlab", "6.5.4"),
		Values: values, Wait: true, WaitForJobs: true, Timeout: "15m"}

	start := time.Now()
	sec, err := s.client.Install(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("install: 201 %s after %s", sec.Name, time.Since(start))
	if sec.Name != "sh.helm.release.v1."+name+".v1" {
		t.Fatalf("secret %s", sec.Name)
	}
	seq := recordProgress(t, s, ns, name)
	deadline := start.Add(20 * time.Minute)
	waitListed(t, s, ns, name, 1, "pending-install", nil, deadline)
	t.Parallel()
	waitListed(t, s, ns, name, 1, "deployed", []string{"pending-install"}, deadline)
	states, end := seq()
	took := end.Sub(start)
	t.Logf("install deployed after %s", took)
	if took < 2*time.Minute {
		t.Errorf("install took %s: the gitlab profile (webservice ready after 120 s) should make it take over 2 minutes", took)
	}
	for _, st := range states {
		t.Logf("progress %s", st)
	}
	checkProgressSequence(t, states)

	// Upgrade with changed values. The chart is named again: Helm stores the chart with its
	// disabled subcharts removed, and GitLab's templates include helpers from those, so the
	// stored chart cannot be rendered again (see docs/api.md, "Known limits"). The change
	// rolls the exporter's pod (ready in 20 s) and the migrations run again (30 s), not the
	// webservice (120 s): the install above is the long wait this story is about, and the
	// upgrade was the end-to-end package's longest step.
	values["gitlab"].(map[string]any)["gitlab-exporter"] = map[string]any{"annotations": map[string]any{"async-helm.io/upgrade": "2"}}
	up := api.ReleaseRequest{Name: name, Namespace: ns, ChartURL: req.ChartURL, Values: values, Wait: true, WaitForJobs: true, Timeout: "15m"}
	sec, err = s.client.Upgrade(ctx, up)
	if err != nil {
		t.Fatal(err)
	}
	if sec.Name != "sh.helm.release.v1."+name+".v2" || sec.Labels["status"] != "pending-upgrade" {
		t.Fatalf("upgrade answered %s %v", sec.Name, sec.Labels)
	}
	waitThrough(t, s, ns, name, "pending-upgrade", "deployed", 2, 20*time.Minute)
	rel, err := s.client.Get(ctx, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	exporter, _ := rel.Config["gitlab"].(map[string]any)["gitlab-exporter"].(map[string]any)
	if a, _ := exporter["annotations"].(map[string]any); a["async-helm.io/upgrade"] != "2" {
		t.Errorf("revision 2 values: gitlab-exporter %v", exporter)
	}
}

// recordProgress polls the release's progress until the revision is final; the returned
// function waits for that and gives the distinct states seen, in order, and when the
// release was first seen no longer pending (the test itself may be paused by then).
func recordProgress(t *testing.T, s *stack, ns, name string) func() ([]progress.Progress, time.Time) {
	type result struct {
		seen []progress.Progress
		end  time.Time
	}
	done := make(chan result, 1)
	go func() {
		var seen []progress.Progress
		deadline := time.Now().Add(20 * time.Minute)
		for time.Now().Before(deadline) {
			rel := s.getRelease(t, ns, name)
			if rel.Release == nil || rel.Info == nil || !strings.HasPrefix(rel.Info.Status.String(), "pending") {
				break
			}
			if p := rel.Progress; p != nil && (len(seen) == 0 || !seen[len(seen)-1].Same(*p)) {
				seen = append(seen, *p)
			}
			time.Sleep(time.Second)
		}
		done <- result{seen, time.Now()}
	}()
	return func() ([]progress.Progress, time.Time) { r := <-done; return r.seen, r.end }
}

// checkProgressSequence: readiness only grows while Helm waits, from none of the workloads
// to all of them, and every state names what it still waits for.
func checkProgressSequence(t *testing.T, states []progress.Progress) {
	t.Helper()
	var waiting []progress.Progress
	for _, p := range states {
		if p.Phase == progress.PhaseWaiting {
			waiting = append(waiting, p)
		}
	}
	if len(waiting) < 3 {
		t.Fatalf("%d waiting states seen, want the readiness to move at least 3 times", len(waiting))
	}
	first, last := waiting[0], waiting[len(waiting)-1]
	if first.Total < 10 || first.Ready >= first.Total/2 {
		t.Errorf("first waiting state %s: want most of GitLab's workloads not ready yet", first)
	}
	if last.Ready != last.Total-1 && last.Ready != last.Total {
		t.Errorf("last waiting state %s: want all but the last one ready", last)
	}
	for i, p := range waiting {
		if i > 0 && p.Ready < waiting[i-1].Ready {
			t.Errorf("readiness went back: %s after %s", p, waiting[i-1])
		}
		if p.Ready < p.Total && len(p.WaitingFor) != p.Total-p.Ready {
			t.Errorf("%s names %d workloads it waits for, want %d", p, len(p.WaitingFor), p.Total-p.Ready)
		}
	}
	if !strings.Contains(strings.Join(waiting[len(waiting)-1].WaitingFor, ","), "webservice") && last.Ready < last.Total {
		t.Errorf("the last workload waited for is not the webservice (120 s in the profile): %v", last.WaitingFor)
	}
}

// waitThrough polls the list API (what the console shows) and requires the release to be
// seen in the pending status first and then in the final one, at that revision.
func waitThrough(t *testing.T, s *stack, ns, name, pending, final string, revision int, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	waitListed(t, s, ns, name, revision, pending, nil, deadline)
	waitListed(t, s, ns, name, revision, final, []string{pending}, deadline)
}

// waitListed polls the list API until it shows the revision in status want; any status
// other than want and those in passing fails the test.
func waitListed(t *testing.T, s *stack, ns, name string, revision int, want string, passing []string, deadline time.Time) {
	t.Helper()
	for {
		rels, err := s.client.List(context.Background(), ns)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rels {
			if r.Name != name || r.Version != revision {
				continue
			}
			switch st := r.Info.Status.String(); {
			case st == want:
				return
			case !slices.Contains(passing, st):
				t.Fatalf("revision %d is %s, want %s: %s", revision, st, want, r.Info.Description)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("revision %d not %s in time", revision, want)
		}
		time.Sleep(2 * time.Second)
	}
}

func deleteClusterScoped(t *testing.T, ns string) {
	ctx := context.Background()
	rbac := cluster.Client.RbacV1()
	if crs, err := rbac.ClusterRoles().List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range crs.Items {
			if o.Annotations["meta.helm.sh/release-namespace"] == ns {
				_ = rbac.ClusterRoles().Delete(ctx, o.Name, metav1.DeleteOptions{})
			}
		}
	}
	if crbs, err := rbac.ClusterRoleBindings().List(ctx, metav1.ListOptions{}); err == nil {
		for _, o := range crbs.Items {
			if o.Annotations["meta.helm.sh/release-namespace"] == ns {
				_ = rbac.ClusterRoleBindings().Delete(ctx, o.Name, metav1.DeleteOptions{})
			}
		}
	}
}
