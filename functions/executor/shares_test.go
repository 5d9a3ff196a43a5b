package main

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/operator"
	"github.com/async-helm/async-helm/internal/testwait"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// Long waits (docs/design.md, "Tenants and shares"): tenant A (dev, in its namespace) sends
// twice the executor's action slots of installs with --wait --timeout 30m and --retries 3
// whose pods never become ready; the first hold every slot, the rest wait in A's queue.
// Tenant B (another caller, another namespace) installs the tiny chart without wait: it
// ends deployed while every one of A's is still pending, on a slot one of A's waits lent.
func TestLongWaitsDoNotHoldAnotherTenantsInstall(t *testing.T) {
	const slots = 4
	r := newRig(t, Config{MaxParallel: slots, SlotWait: 5 * time.Minute})
	ctx := context.Background()
	chart := chartsource.Ref{URL: r.charts.ChartURL("tiny", "0.1.0")}
	nsA, nsB := cluster.Namespace(t), cluster.Namespace(t)
	if _, err := cluster.Client.RbacV1().RoleBindings(nsA).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "dev-admin"},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "admin"},
		Subjects:   []rbacv1.Subject{{Kind: "User", Name: "dev", APIGroup: "rbac.authorization.k8s.io"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cluster.WaitDevAllowed(t, nsA, "create", "secrets", "")
	dev := events.Caller{User: "dev", UID: "dev-uid", Groups: []string{"developers", "system:authenticated"}}
	stuck := map[string]any{"podAnnotations": map[string]any{"async-helm.io/simulate": "stuck"}}
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // after the rig's shutdown (cleanups run last first): A's actions end
	t.Cleanup(r.shutdown)
	for i := range 2 * slots {
		a := r.reserve(t, release.ActionInstall, nsA, fmt.Sprintf("slow%d", i), chart, stuck,
			events.Options{Wait: true, Timeout: 30 * time.Minute, Retries: 3})
		a.Caller = dev
		wg.Add(1)
		go func() { defer wg.Done(); r.deliver(t, a) }()
	}
	waitShares(t, r, func(held, queued int) bool { return held == slots && queued == slots })

	b := r.reserve(t, release.ActionInstall, nsB, "tiny", chart, nil, events.Options{})
	b.Caller = events.Caller{User: operator.User, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + operator.Namespace, "system:authenticated"}}
	if code := r.deliver(t, b); code != http.StatusOK {
		t.Fatalf("B's delivery: %d", code)
	}
	if st := r.get(t, nsB, "tiny", 1).Info.Status; st != helmrelease.StatusDeployed {
		t.Fatalf("B's install: %s", st)
	}
	for i := range 2 * slots {
		if st := r.get(t, nsA, fmt.Sprintf("slow%d", i), 1).Info.Status; st != helmrelease.StatusPendingInstall {
			t.Errorf("A's slow%d is %s, want still pending-install (its pods never get ready)", i, st)
		}
	}
}

// waitShares waits until dev's flow holds and queues what ok accepts (the executor's
// Shares, as /metrics shows them).
func waitShares(t *testing.T, r *rig, ok func(held, queued int) bool) {
	t.Helper()
	testwait.Within(t, 2*time.Minute, "dev's flow to hold every slot and queue as many", func() bool {
		actions, _ := r.fn.svc.Shares()
		held, queued := 0, 0
		for _, f := range actions {
			if f.Caller == "dev" {
				held, queued = held+f.Held, queued+f.Queued
			}
		}
		return ok(held, queued)
	})
}
