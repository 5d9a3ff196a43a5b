package sweeper

import (
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

func TestDeadLetter(t *testing.T) {
	e := newEnv(t)
	e.Reserve("web", release.ActionInstall, 1)
	a := events.Action{Action: release.ActionInstall, Namespace: "ns", Name: "web", Revision: 1,
		SecretName: release.SecretName("web", 1), RequestID: "req-web"}
	for _, tc := range []struct {
		name   string
		a      events.Action
		marked bool
	}{
		{"another request of the revision", func() events.Action { b := a; b.RequestID = "old"; return b }(), false},
		{"no such revision", func() events.Action { b := a; b.SecretName = release.SecretName("web", 9); return b }(), false},
		{"its own request", a, true},
	} {
		marked, err := e.sw.DeadLetter(ctx(t), tc.a)
		if err != nil || marked != tc.marked {
			t.Errorf("%s: DeadLetter = %v, %v; want %v", tc.name, marked, err, tc.marked)
		}
	}
	if !e.Revision("web", 1).DeadLettered {
		t.Error("not marked")
	}
	if st, _ := e.Status("web", 1); st != helmrelease.StatusPendingInstall {
		t.Errorf("a dead letter must never fail the revision: %s", st)
	}
	e.Set("web", 1, helmrelease.StatusDeployed, "")
	if marked, err := e.sw.DeadLetter(ctx(t), a); err != nil || marked {
		t.Errorf("dead letter of a finished revision: %v, %v", marked, err)
	}
}
