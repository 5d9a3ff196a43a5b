package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// Even a validly signed event cannot make the executor act as system:masters (a leaked or
// misused key would otherwise be cluster-admin): 4xx, no Helm action.
func TestSystemMastersIsNeverImpersonated(t *testing.T) {
	key := []byte("hardening-test-signing-key-0123456789")
	r := newRig(t, Config{EventSigningKey: string(key), EventMaxAge: time.Hour})
	ns := cluster.Namespace(t)
	a := r.reserve(t, release.ActionInstall, ns, "masters", chartsource.Ref{URL: r.charts.ChartURL("clusterrole", "0.1.0")}, nil, events.Options{})
	a.Caller = events.Caller{User: "mallory", UID: "m-uid", Groups: []string{"system:masters", "system:authenticated"}}
	e, err := events.NewAccepted(a)
	if err != nil {
		t.Fatal(err)
	}
	events.Sign(&e, key, time.Now())
	r.bind(t, &e, key, a)
	t.Cleanup(func() {
		_ = cluster.Client.RbacV1().ClusterRoles().Delete(context.Background(), ns+"-masters", metav1.DeleteOptions{})
	})
	if code := r.send(t, e); code < 400 || code >= 500 {
		t.Fatalf("signed event naming system:masters: %d, want 4xx", code)
	}
	rel := r.get(t, ns, "masters", 1)
	if rel.Info.Status != helmrelease.StatusPendingInstall || rel.Info.Description != release.ReservedDescription {
		t.Fatalf("after the refused event: %s %q, want the untouched reservation", rel.Info.Status, rel.Info.Description)
	}
	if _, err := cluster.Client.RbacV1().ClusterRoles().Get(context.Background(), ns+"-masters", metav1.GetOptions{}); err == nil {
		t.Fatal("the chart ran as system:masters")
	}
}

// Credentials in a chart URL do not reach the failure reason (which the notifier puts in
// its events and `helm history` shows).
func TestChartURLCredentialsStayOutOfTheFailureReason(t *testing.T) {
	r := newRig(t, Config{})
	ns := cluster.Namespace(t)
	u := strings.Replace(r.charts.URL, "http://", "http://alice:s3cr3t-pw@", 1) + "/missing-0.1.0.tgz"
	a := r.reserve(t, release.ActionInstall, ns, "creds", chartsource.Ref{URL: u}, nil, events.Options{})
	if code := r.deliver(t, a); code != http.StatusOK {
		t.Fatalf("deliver: %d", code)
	}
	rel := r.get(t, ns, "creds", 1)
	if rel.Info.Status != helmrelease.StatusFailed || !strings.Contains(rel.Info.Description, "REDACTED@") {
		t.Fatalf("status %s, reason %q: want failed naming the redacted URL", rel.Info.Status, rel.Info.Description)
	}
	if strings.Contains(rel.Info.Description, "s3cr3t") || strings.Contains(rel.Info.Description, "alice") {
		t.Fatalf("the failure reason shows the URL's credentials: %q", rel.Info.Description)
	}
}
