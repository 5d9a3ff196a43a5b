package notifier

import (
	"reflect"
	"strings"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// An uninstall is reported as uninstalling when marked, then uninstalled when Helm
// purges the records, with the uninstall's request id; the older revisions' deletion says
// nothing.
func TestUninstallReportsUninstalled(t *testing.T) {
	e := newEnv(t)
	e.svc.Sweep.Interval = 0
	e.reserve("web", release.ActionInstall, 1)
	e.set("web", 1, helmrelease.StatusSuperseded, "")
	e.reserve("web", release.ActionUpgrade, 2)
	e.set("web", 2, helmrelease.StatusDeployed, "")
	if err := e.svc.Start(ctx(t), true); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return e.revision("web", 2).Notified == "deployed" })
	before := len(e.sink.events())

	if _, err := e.store.MarkUninstalling(ctx(t), release.UninstallMark{Namespace: "ns", Name: "web", Revision: 2, RequestID: "req-u"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return len(e.sink.events()) == before+1 })
	for _, v := range []int{1, 2} { // Helm's purge
		if err := e.c.CoreV1().Secrets("ns").Delete(ctx(t), release.SecretName("web", v), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, func() bool { return len(e.sink.events()) == before+2 })
	if got := e.sink.statuses(t)[before:]; !reflect.DeepEqual(got, []string{"uninstalling", events.StatusUninstalled}) {
		t.Fatalf("sent %v", got)
	}
	last := e.sink.events()[before+1]
	c, err := events.ParseStatus(last)
	if err != nil {
		t.Fatal(err)
	}
	if last.Type() != "dev.asynchelm.release.status.uninstalled" || c.Name != "web" || c.Revision != 2 || c.RequestID != "req-u" || c.Chart != "tiny" {
		t.Errorf("uninstalled event %s %+v", last.Type(), c)
	}
}

// An accepted uninstall whose delivery was lost is re-sent by the sweeper as a reservation
// is, byte for byte, and failed (not left uninstalling) past the queue deadline.
func TestSweeperDrivesAnUninstall(t *testing.T) {
	e := newEnv(t)
	e.reserve("web", release.ActionInstall, 1)
	e.set("web", 1, helmrelease.StatusDeployed, "")
	e.clock.Add(48 * time.Hour) // deployed two days before its uninstall
	ev, err := events.NewAccepted(events.Action{Action: release.ActionUninstall, Namespace: "ns", Name: "web", Revision: 1,
		SecretName: release.SecretName("web", 1), RequestID: "req-u"})
	if err != nil {
		t.Fatal(err)
	}
	stored, _ := ev.MarshalJSON()
	if _, err := e.store.MarkUninstalling(ctx(t), release.UninstallMark{Namespace: "ns", Name: "web", Revision: 1, RequestID: "req-u", Event: stored}); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(3 * time.Minute)
	res, err := e.svc.SweepOnce(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	got := e.redrive.events()
	if res != (SweepResult{Redriven: 1}) || len(got) != 1 {
		t.Fatalf("swept %+v, re-sent %d", res, len(got))
	}
	if raw, _ := got[0].MarshalJSON(); string(raw) != string(stored) || got[0].Type() != events.TypeUninstallAccepted {
		t.Errorf("re-sent %s, not the stored uninstall event", got[0].Type())
	}
	e.clock.Add(2 * time.Hour)
	if res, err := e.svc.SweepOnce(ctx(t)); err != nil || res != (SweepResult{Failed: 1}) {
		t.Fatalf("past the deadline: %+v, %v", res, err)
	}
	if st, desc := e.status("web", 1); st != helmrelease.StatusFailed || !strings.Contains(desc, "never started") {
		t.Errorf("revision %s %q", st, desc)
	}
}
