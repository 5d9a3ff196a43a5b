package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	helmrelease "helm.sh/helm/v3/pkg/release"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/operator"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
)

// The executor acts as the caller: dev, admin of its namespace only, cannot have a chart
// create a ClusterRole; a cluster admin (by RBAC) can.
func TestActionsRunAsTheCaller(t *testing.T) {
	engines(t, func(t *testing.T, engine helmexec.Engine) {
		r := newRig(t, Config{HelmEngine: string(engine)})
		ctx := context.Background()
		chart := chartsource.Ref{URL: r.charts.ChartURL("clusterrole", "0.1.0")}

		devNS := cluster.Namespace(t)
		_, err := cluster.Client.RbacV1().RoleBindings(devNS).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "dev-admin"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "admin"},
			Subjects:   []rbacv1.Subject{{Kind: "User", Name: "dev", APIGroup: "rbac.authorization.k8s.io"}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		a := r.reserve(t, release.ActionInstall, devNS, "cr", chart, nil, events.Options{})
		a.Caller = events.Caller{User: "dev", UID: "dev-uid", Groups: []string{"developers", "system:authenticated"}}
		if code := r.deliver(t, a); code != http.StatusOK {
			t.Fatalf("deliver: %d", code)
		}
		rel := r.get(t, devNS, "cr", 1)
		if rel.Info.Status != helmrelease.StatusFailed || !strings.Contains(rel.Info.Description, "forbidden") ||
			!strings.Contains(rel.Info.Description, `User "dev"`) {
			t.Fatalf("dev's install: %s %q, want failed by RBAC", rel.Info.Status, rel.Info.Description)
		}
		if _, err := cluster.Client.RbacV1().ClusterRoles().Get(ctx, devNS+"-cr", metav1.GetOptions{}); err == nil {
			t.Fatal("dev's chart created a ClusterRole")
		}

		adminNS := cluster.Namespace(t)
		b := r.reserve(t, release.ActionInstall, adminNS, "cr", chart, nil, events.Options{})
		// An identity whose rights come from RBAC (a ServiceAccount bound to cluster-admin): the
		// executor never impersonates system:masters.
		b.Caller = events.Caller{User: operator.User, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + operator.Namespace, "system:authenticated"}}
		if code := r.deliver(t, b); code != http.StatusOK {
			t.Fatalf("deliver: %d", code)
		}
		if st := r.get(t, adminNS, "cr", 1).Info.Status; st != helmrelease.StatusDeployed {
			t.Fatalf("admin's install: %s", st)
		}
		t.Cleanup(func() { _ = cluster.Client.RbacV1().ClusterRoles().Delete(ctx, adminNS+"-cr", metav1.DeleteOptions{}) })
	})
}

func TestUnsignedAlteredForeignAndReplayedEventsAreRejected(t *testing.T) {
	key := []byte("test-signing-key-of-at-least-32-bytes")
	r := newRig(t, Config{EventSigningKey: string(key), EventMaxAge: time.Hour})
	ns := cluster.Namespace(t)
	a := r.reserve(t, release.ActionInstall, ns, "signed", chartsource.Ref{URL: r.charts.ChartURL("tiny", "0.1.0")}, nil, events.Options{})
	now := time.Now()
	build := func() *events.Action { c := a; return &c }

	unsigned, _ := events.NewAccepted(*build())
	altered, _ := events.NewAccepted(*build())
	events.Sign(&altered, key, now)
	evil := build()
	evil.Values = map[string]any{"image": "evil/miner"}
	_ = altered.SetData("application/json", evil)
	foreign, _ := events.NewAccepted(*build())
	events.Sign(&foreign, []byte("another-key-of-at-least-32-bytes-long"), now)
	replayed, _ := events.NewAccepted(*build())
	events.Sign(&replayed, key, now.Add(-2*time.Hour))

	for _, c := range []struct {
		name string
		code int
	}{
		{"unsigned", r.send(t, unsigned)},
		{"altered", r.send(t, altered)},
		{"foreign key", r.send(t, foreign)},
		{"replayed", r.send(t, replayed)},
	} {
		if c.code != http.StatusUnauthorized {
			t.Errorf("%s event: %d, want 401", c.name, c.code)
		}
	}
	// None of them ran Helm: the revision is still the untouched reservation.
	rel := r.get(t, ns, "signed", 1)
	if rel.Info.Status != helmrelease.StatusPendingInstall || rel.Info.Description != release.ReservedDescription {
		t.Fatalf("after rejected events: %s %q", rel.Info.Status, rel.Info.Description)
	}
	if _, err := cluster.Client.AppsV1().Deployments(ns).Get(context.Background(), "signed", metav1.GetOptions{}); err == nil {
		t.Fatal("a rejected event created the release's Deployment")
	}
	// The stored copy (signed, unbound) posted to the executor: acknowledged, nothing run.
	stored, _ := events.NewAccepted(*build())
	events.Sign(&stored, key, time.Now())
	if code := r.send(t, stored); code != http.StatusOK {
		t.Errorf("unbound event: %d, want 200 (acknowledged, refused)", code)
	}
	if st := r.get(t, ns, "signed", 1).Info.Status; st != helmrelease.StatusPendingInstall {
		t.Fatalf("an unbound event ran: %s", st)
	}
	good, _ := events.NewAccepted(*build())
	events.Sign(&good, key, time.Now())
	r.bind(t, &good, key, a)
	if code := r.send(t, good); code != http.StatusOK {
		t.Fatalf("signed event: %d", code)
	}
	if st := r.get(t, ns, "signed", 1).Info.Status; st != helmrelease.StatusDeployed {
		t.Fatalf("after the signed event: %s", st)
	}
}

// bind does what submit does once its reservation exists: binds e to the Secret's UID.
func (r *rig) bind(t *testing.T, e *cloudevents.Event, key []byte, a events.Action) {
	t.Helper()
	sec, err := cluster.Client.CoreV1().Secrets(a.Namespace).Get(context.Background(), a.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	events.BindSecret(e, key, sec.UID)
}
