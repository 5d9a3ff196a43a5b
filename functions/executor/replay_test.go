package main

import (
	"context"
	"net/http"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// A namespace editor replays a finished request: they delete its release record and its
// Deployment, reserve the same revision again by hand with the victim's request id (a label
// anyone who may write Secrets there can set), and deliver the victim's signed event again.
// The executor refuses it: the request was consumed for the first Secret (by UID), so Helm
// does not run as the victim and the forged record is left as the tenant wrote it.
func TestReplayOntoARecreatedRecordIsRefused(t *testing.T) {
	r := newRig(t, Config{})
	ns := cluster.Namespace(t)
	ctx := context.Background()
	a := r.reserve(t, release.ActionInstall, ns, "web", chartsource.Ref{URL: r.charts.ChartURL("tiny", "0.1.0")}, nil, events.Options{})
	if code := r.deliver(t, a); code != http.StatusOK {
		t.Fatalf("deliver: %d", code)
	}
	first, err := cluster.Client.CoreV1().Secrets(ns).Get(ctx, a.SecretName, metav1.GetOptions{})
	if err != nil || first.Labels["status"] != "deployed" {
		t.Fatalf("the victim's install: %v %v", first.Labels, err)
	}
	rec, err := (&consumed.Store{Client: cluster.Client, Namespace: r.fn.cfg.Namespace}).Lookup(ctx, a.RequestID)
	if err != nil || rec == nil || rec.SecretUID != first.UID {
		t.Fatalf("consumed record %+v (%v), want bound to %s", rec, err, first.UID)
	}

	// The tenant's part.
	if err := cluster.Client.CoreV1().Secrets(ns).Delete(ctx, a.SecretName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := cluster.Client.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := r.store.Reserve(ctx, release.Reservation{Namespace: ns, Name: "web", Action: release.ActionInstall,
		Revision: 1, Chart: &chart.Metadata{Name: "tiny", Version: "0.1.0"}, RequestID: a.RequestID}); err != nil {
		t.Fatal(err)
	}
	if code := r.deliver(t, a); code != http.StatusOK {
		t.Fatalf("replay: %d, want 200 (acknowledged, refused)", code)
	}
	if st := r.get(t, ns, "web", 1).Info.Status; st != helmrelease.StatusPendingInstall {
		t.Errorf("the forged record is %s: the executor acted on it", st)
	}
	if _, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Helm ran as the victim again: the Deployment is back (%v)", err)
	}
	if _, err := cluster.Client.CoordinationV1().Leases(ns).Get(ctx, a.SecretName, metav1.GetOptions{}); err == nil {
		t.Error("heartbeat lease left behind")
	}
}
