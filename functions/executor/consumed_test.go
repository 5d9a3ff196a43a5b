package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/hostile"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// Attack by a namespace editor, on the local cluster with real Helm: the delivered (bound)
// event of an install is kept in the pending release Secret while it runs (or the tenant
// lets the sweeper bind the stored copy). Once the install is deployed, the editor deletes
// what it made, rewrites the same Secret (same UID) back to pending-install and posts the
// bound event to the executor's Service again. One 201 must run once: the second delivery
// is acknowledged and Helm does not run again as the caller.
func TestBoundEventReplayedOnTheRewoundRecordDoesNotRunTwice(t *testing.T) {
	key := []byte("test-signing-key-of-at-least-32-bytes")
	r := newRig(t, Config{EventSigningKey: string(key), EventMaxAge: time.Hour})
	ctx := context.Background()
	ns := cluster.Namespace(t)
	a := r.reserve(t, release.ActionInstall, ns, "once", chartsource.Ref{URL: r.charts.ChartURL("tiny", "0.1.0")}, nil, events.Options{})
	ev, err := events.NewAccepted(a)
	if err != nil {
		t.Fatal(err)
	}
	events.Sign(&ev, key, time.Now())
	r.bind(t, &ev, key, a)
	if code := r.send(t, ev); code != http.StatusOK {
		t.Fatalf("the delivery: %d", code)
	}
	if st := r.get(t, ns, "once", 1).Info.Status; st != helmrelease.StatusDeployed {
		t.Fatalf("the install: %s", st)
	}
	// The tenant: delete the ConfigMap the install made, rewind the record in place.
	if err := cluster.Client.CoreV1().ConfigMaps(ns).Delete(ctx, "once-config", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := hostile.Rewind(ctx, cluster.Client.CoreV1().Secrets(ns), a.SecretName, helmrelease.StatusPendingInstall, nil); err != nil {
		t.Fatal(err)
	}
	code := r.send(t, ev)
	_, err = cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "once-config", metav1.GetOptions{})
	if !apierrors.IsNotFound(err) {
		t.Errorf("the replay (answered %d) ran the install again: once-config exists again (%v), revision 1 is %s",
			code, err, r.get(t, ns, "once", 1).Info.Status)
	}
}
