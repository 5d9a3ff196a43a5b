package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
)

// Attack by a namespace editor: once an admin's upgrade that gives no values (so reuses
// the deployed ones) is accepted, it rewrites the deployed record's values. The upgrade
// must not render them as the admin: it fails, naming the rewrite, and the release's
// objects keep the accepted values.
func TestUpgradeRefusesRewrittenReusedValues(t *testing.T) {
	engines(t, func(t *testing.T, engine helmexec.Engine) {
		r := newRig(t, Config{HelmEngine: string(engine)})
		ns := cluster.Namespace(t)
		admin := operatorCaller()
		chart := chartsource.Ref{URL: r.charts.ChartURL("tiny", "0.1.0")}
		install := r.reserve(t, release.ActionInstall, ns, "web", chart, map[string]any{"message": "accepted"}, events.Options{})
		install.Caller = admin
		if code := r.deliver(t, install); code != http.StatusOK {
			t.Fatalf("install: %d", code)
		}
		// Submit's part: the upgrade is accepted with the deployed values pinned.
		up := r.reserve(t, release.ActionUpgrade, ns, "web", chart, nil, events.Options{})
		up.Caller = admin
		pin, err := release.ValuesPinOf(r.get(t, ns, "web", 1))
		if err != nil {
			t.Fatal(err)
		}
		up.ValuesPin = pin
		rewriteRecord(t, ns, "web", 1, func(rel *helmrelease.Release) { rel.Config = map[string]any{"message": "tenant's"} })
		if code := r.deliver(t, up); code != http.StatusOK {
			t.Fatalf("upgrade: %d", code)
		}
		rel := r.get(t, ns, "web", 2)
		if rel.Info.Status != helmrelease.StatusFailed || !strings.Contains(rel.Info.Description, "changed since the request was accepted") {
			t.Errorf("the upgrade over rewritten values: %s %q", rel.Info.Status, rel.Info.Description)
		}
		cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "web-config", metav1.GetOptions{})
		if err != nil || cm.Data["message"] != "accepted" {
			t.Errorf("web-config after the upgrade: %v %v", cm.Data, err)
		}
	})
}
