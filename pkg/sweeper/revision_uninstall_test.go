package sweeper

import (
	"fmt"
	"strings"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// An accepted uninstall whose delivery was lost is re-sent by the sweeper as a reservation
// is, byte for byte, and failed (not left uninstalling) past the queue deadline.
func TestSweeperDrivesAnUninstall(t *testing.T) {
	e := newEnv(t)
	e.Reserve("web", release.ActionInstall, 1)
	e.Set("web", 1, helmrelease.StatusDeployed, "")
	e.clock.Add(48 * time.Hour) // deployed two days before its uninstall
	stored := e.Signed(events.Action{Action: release.ActionUninstall, Namespace: "ns", Name: "web", Revision: 1,
		SecretName: release.SecretName("web", 1), RequestID: "req-u"})
	if _, err := e.store.MarkUninstalling(ctx(t), release.UninstallMark{Namespace: "ns", Name: "web", Revision: 1, RequestID: "req-u", Event: stored}); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(3 * time.Minute)
	res, err := e.sw.SweepOnce(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	got := e.redrive.Events()
	if res != (SweepResult{Redriven: 1}) || len(got) != 1 {
		t.Fatalf("swept %+v, re-sent %d", res, len(got))
	}
	sent := got[0].Clone() // bound to the marked Secret on its way out
	sent.SetExtension(events.ExtSecretUID, nil)
	sent.SetExtension(events.ExtBinding, nil)
	if raw, _ := sent.MarshalJSON(); string(raw) != string(stored) || got[0].Type() != events.TypeUninstallAccepted {
		t.Errorf("re-sent %s, not the stored uninstall event", got[0].Type())
	}
	e.clock.Add(2 * time.Hour)
	if res, err := e.sw.SweepOnce(ctx(t)); err != nil || res != (SweepResult{Failed: 1}) {
		t.Fatalf("past the deadline: %+v, %v", res, err)
	}
	if st, desc := e.Status("web", 1); st != helmrelease.StatusFailed || !strings.Contains(desc, "never started") {
		t.Errorf("revision %s %q", st, desc)
	}
}

// A helm uninstall run by hand on a revision async-helm installed is Helm's own (no action
// label): the sweeper neither re-sends nor fails it, however long it takes.
func TestSweeperLeavesAHandRunUninstallAlone(t *testing.T) {
	e := deployedWeb(t)
	e.Set("web", 1, helmrelease.StatusUninstalling, "Deletion in progress (or silently failed)")
	e.Patch("web", 1, fmt.Sprintf(`{"metadata":{"labels":{%q:"%d"}}}`, release.LabelModifiedAt, t0.Unix()))
	e.clock.Add(3 * time.Hour) // past Grace and QueueDeadline
	res, err := e.sw.SweepOnce(ctx(t))
	if err != nil || res != (SweepResult{}) {
		t.Errorf("sweep of a hand-run uninstall: %+v, %v", res, err)
	}
	if st, desc := e.Status("web", 1); st != helmrelease.StatusUninstalling {
		t.Errorf("the hand-run uninstall is now %s %q", st, desc)
	}
}
