package executor

import (
	"context"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// remediatedUpgrade deploys web v1, reserves the upgrade v2 and returns its event with
// remediation rollback, v1 pinned as submit pins it.
func (e *env) remediatedUpgrade() events.Action {
	e.t.Helper()
	e.deployRev("web", 1, helmrelease.StatusDeployed)
	if _, err := e.store.Reserve(ctx(e.t), release.Reservation{Namespace: "ns", Name: "web", Action: release.ActionUpgrade,
		Chart: &chart.Metadata{Name: "tiny", Version: "1.0.0"}, RequestID: "req-u"}); err != nil {
		e.t.Fatal(err)
	}
	pin, err := release.PinOf(e.rev("web", 1), "")
	if err != nil {
		e.t.Fatal(err)
	}
	return events.Action{Action: release.ActionUpgrade, Namespace: "ns", Name: "web", Revision: 2, ReuseChart: true,
		SecretName: release.SecretName("web", 2), RequestID: "req-u", RollbackPin: pin,
		Options: events.Options{Timeout: time.Minute, Remediation: "rollback"}}
}

// A namespace editor rewrites the deployed revision after the upgrade was accepted (its
// manifest now a RoleBinding in prod) and the upgrade fails: the remediation refuses to
// restore it as the caller, and says so on the failed attempt.
func TestRemediationRefusesARewrittenTarget(t *testing.T) {
	e, vh := remEnv(t, 1)
	a := e.remediatedUpgrade()
	d := storage.NewSecrets(e.c.CoreV1().Secrets("ns"))
	rel := e.rev("web", 1)
	rel.Manifest = "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: mallory\n  namespace: prod\n"
	if err := d.Update(release.SecretName("web", 1), rel); err != nil {
		t.Fatal(err)
	}
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeFailed {
		t.Fatalf("Handle = %s, %v", got, err)
	}
	if want := "upgrade v2"; strings.Join(vh.verbs, ",") != want {
		t.Fatalf("Helm ran %v, want %s", vh.verbs, want)
	}
	if rel := e.rev("web", 2); rel.Info.Status != helmrelease.StatusFailed ||
		!strings.Contains(rel.Info.Description, "no rollback") || !strings.Contains(rel.Info.Description, "revision 1 was rewritten") {
		t.Errorf("revision 2: %s %q", rel.Info.Status, rel.Info.Description)
	}
	e.noLeases()
}

// checkTarget: only the pinned record, unchanged, is restored.
func TestCheckTarget(t *testing.T) {
	v1 := &helmrelease.Release{Name: "web", Version: 1, Manifest: "kind: ConfigMap",
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny"}}, Info: &helmrelease.Info{Status: helmrelease.StatusDeployed}}
	pin, err := release.PinOf(v1, "")
	if err != nil {
		t.Fatal(err)
	}
	superseded := *v1
	superseded.Info = &helmrelease.Info{Status: helmrelease.StatusSuperseded, Description: "moved on"}
	rewritten := *v1
	rewritten.Manifest = "kind: RoleBinding"
	other := *v1
	other.Version = 2
	for _, c := range []struct {
		name   string
		pin    *release.Pin
		target *helmrelease.Release
		want   string // "" allowed
	}{
		{"pinned, unchanged", pin, v1, ""},
		{"pinned, status moved on", pin, &superseded, ""},
		{"pinned, rewritten", pin, &rewritten, "revision 1 was rewritten"},
		{"another revision", pin, &other, "pinned revision 1, not 2"},
		{"nothing deployed at acceptance", &release.Pin{}, nil, "no revision was deployed"},
		{"an event without a pin", nil, v1, "no rollback target was pinned"},
	} {
		err := checkTarget(c.pin, c.target, "")
		if (c.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
}
