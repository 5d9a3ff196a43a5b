package notifier

import (
	"reflect"
	"testing"
	"testing/synctest"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// uninstall does what an async uninstall does to the cluster: submit's mark, the executor's
// heartbeat Lease and tombstone, Helm's purge of every record, then (finish) the tombstone
// finished and the heartbeat released. Unfinished, the heartbeat stays held (the executor
// died after Helm's purge).
func (e *env) uninstall(name string, revs []int, finish bool) (lease.Tombstone, *lease.Held) {
	e.t.Helper()
	latest := revs[len(revs)-1]
	if _, err := e.store.MarkUninstalling(ctx(e.t), release.UninstallMark{Namespace: "ns", Name: name, Revision: latest, RequestID: "req-u"}); err != nil {
		e.t.Fatal(err)
	}
	held := e.hold(name, latest)
	grave, err := e.store.DigTombstone(ctx(e.t), lease.Tombstone{Namespace: "ns", Name: name, Revision: latest, RequestID: "req-u", Chart: "tiny-1.0.0"})
	if err != nil {
		e.t.Fatal(err)
	}
	for _, v := range revs {
		if err := e.c.CoreV1().Secrets("ns").Delete(ctx(e.t), release.SecretName(name, v), metav1.DeleteOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
	if finish {
		e.finish(grave, held)
	}
	return grave, held
}

func (e *env) hold(name string, rev int) *lease.Held {
	e.t.Helper()
	hb := &lease.Heartbeat{Client: e.c, Holder: "executor", Duration: 30 * time.Second, Clock: e.clock}
	held, err := hb.Hold(ctx(e.t), "ns", release.LeaseName(name, rev))
	if err != nil || held == nil {
		e.t.Fatal(held, err)
	}
	return held
}

func (e *env) finish(grave lease.Tombstone, held *lease.Held) {
	e.t.Helper()
	if err := e.store.FinishTombstone(ctx(e.t), grave); err != nil {
		e.t.Fatal(err)
	}
	if err := held.Release(ctx(e.t)); err != nil {
		e.t.Fatal(err)
	}
}

// deployedWeb is an environment without sweeps, holding release web, revision 1 deployed.
func deployedWeb(t *testing.T) *env {
	e := newEnv(t)
	e.Reserve("web", release.ActionInstall, 1)
	e.Set("web", 1, helmrelease.StatusDeployed, "")
	return e
}

// upgraded makes release name: revision 1 superseded, revision 2 deployed.
func (e *env) upgraded(name string) {
	e.t.Helper()
	e.Reserve(name, release.ActionInstall, 1)
	e.Set(name, 1, helmrelease.StatusSuperseded, "")
	e.Reserve(name, release.ActionUpgrade, 2)
	e.Set(name, 2, helmrelease.StatusDeployed, "")
}

// sweepTombstones runs the sweep's tombstone pass and waits until the workers are idle (its
// callers run in a testing/synctest bubble).
func (e *env) sweepTombstones() {
	e.t.Helper()
	if err := e.svc.QueueTombstones(ctx(e.t)); err != nil {
		e.t.Fatal(err)
	}
	synctest.Wait()
}

func (e *env) tombstones() int {
	e.t.Helper()
	l, err := e.c.CoordinationV1().Leases("ns").List(ctx(e.t), metav1.ListOptions{LabelSelector: lease.SelectorTombstones})
	if err != nil {
		e.t.Fatal(err)
	}
	return len(l.Items)
}

func (e *env) checkUninstalled(ev cloudevents.Event) {
	e.t.Helper()
	c, err := events.ParseStatus(ev)
	if err != nil {
		e.t.Fatal(err)
	}
	if ev.Type() != "dev.asynchelm.release.status.uninstalled" || c.Name != "web" || c.Revision != 2 || c.RequestID != "req-u" || c.Chart != "tiny" ||
		ev.ID() != events.StatusEventID("ns", "web", 2, events.StatusUninstalled, "req-u") {
		e.t.Errorf("uninstalled event %s %s %+v", ev.Type(), ev.ID(), c)
	}
}

// An uninstall is reported as uninstalling when marked, then uninstalled from the
// executor's tombstone, once, with the uninstall's request id; the deletion of the
// records says nothing, and the tombstone is deleted once reported.
func TestUninstallReportsUninstalled(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.upgraded("web")
		if err := e.svc.Start(ctx(t), true); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, func() bool { return e.Revision("web", 2).Notified == "deployed" })
		before := len(e.sink.Events())

		grave, held := e.uninstall("web", []int{1, 2}, false)
		testwait.For(t, func() bool { return len(e.sink.Events()) == before+1 }) // uninstalling
		synctest.Wait()
		if got := e.sink.Statuses(t)[before:]; !reflect.DeepEqual(got, []string{"uninstalling"}) {
			t.Fatalf("before the executor finished its tombstone: sent %v", got)
		}
		e.finish(grave, held)
		testwait.For(t, func() bool { return len(e.sink.Events()) == before+2 && e.tombstones() == 0 })
		synctest.Wait()
		if got := e.sink.Statuses(t)[before:]; !reflect.DeepEqual(got, []string{"uninstalling", events.StatusUninstalled}) {
			t.Fatalf("sent %v", got)
		}
		e.checkUninstalled(e.sink.Events()[before+1])
	})
}

// A notifier that was down for the whole uninstall reports it when it starts, in watch
// mode and in the ApiServerSource mode alike; a sink that refuses delays it, never loses it.
func TestUninstallWhileTheNotifierWasDown(t *testing.T) {
	for _, watch := range []bool{true, false} {
		t.Run(map[bool]string{true: "watch", false: "source"}[watch], func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				e := newEnv(t)
				e.upgraded("web")
				e.uninstall("web", []int{1, 2}, true)
				e.sink.Refuse(true)
				if err := e.svc.Start(ctx(t), watch); err != nil {
					t.Fatal(err)
				}
				time.Sleep(300 * time.Millisecond) // the bubble's clock: the queue retries at 100 and 200 ms
				synctest.Wait()
				if e.tombstones() != 1 {
					t.Fatal("the tombstone went while the sink refused")
				}
				e.sink.Refuse(false)
				testwait.For(t, func() bool { return len(e.sink.Events()) == 1 && e.tombstones() == 0 })
				e.checkUninstalled(e.sink.Events()[0])
			})
		})
	}
}

// An executor that died mid-uninstall leaves its tombstone unfinished. Once no executor
// holds the revision, the sweep decides from the records: none left (Helm deletes them
// last) is uninstalled; a record still uninstalling is the sweeper's to drive again; a
// record marked failed needs no event, and the tombstone goes.
func TestAbandonedUninstall(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t)
		e.upgraded("web")
		e.uninstall("web", []int{1, 2}, false)
		if err := e.svc.Start(ctx(t), true); err != nil {
			t.Fatal(err)
		}
		e.sweepTombstones()
		if len(e.sink.Events()) != 0 || e.tombstones() != 1 {
			t.Fatalf("reported while its executor's Lease is live: %v", e.sink.Statuses(t))
		}
		e.clock.Add(time.Minute)
		e.sweepTombstones()
		testwait.For(t, func() bool { return len(e.sink.Events()) == 1 && e.tombstones() == 0 })
		e.checkUninstalled(e.sink.Events()[0])

		// Its records are still there: uninstalling (not done), then failed.
		e.Reserve("api", release.ActionInstall, 1)
		e.Set("api", 1, helmrelease.StatusDeployed, "")
		testwait.For(t, func() bool { return e.Revision("api", 1).Notified == "deployed" }) // the mark is a CAS
		if _, err := e.store.MarkUninstalling(ctx(t), release.UninstallMark{Namespace: "ns", Name: "api", Revision: 1, RequestID: "req-a"}); err != nil {
			t.Fatal(err)
		}
		e.hold("api", 1)
		if _, err := e.store.DigTombstone(ctx(t), lease.Tombstone{Namespace: "ns", Name: "api", Revision: 1, RequestID: "req-a"}); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(time.Minute)
		testwait.For(t, func() bool { return e.Revision("api", 1).Notified == "uninstalling" })
		sent := len(e.sink.Events())
		e.sweepTombstones()
		if len(e.sink.Events()) != sent || e.tombstones() != 1 {
			t.Fatalf("an uninstall still to be driven was reported: %v", e.sink.Statuses(t)[sent:])
		}
		if _, err := e.store.MarkFailed(ctx(t), "ns", "api", 1, "gave up", release.ReplaceFailed); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, func() bool { return e.Revision("api", 1).Notified == "failed" })
		sent = len(e.sink.Events())
		e.sweepTombstones()
		testwait.For(t, func() bool { return e.tombstones() == 0 })
		if got := e.sink.Statuses(t)[sent:]; len(got) != 0 {
			t.Errorf("a failed uninstall's tombstone sent %v", got)
		}
	})
}

// A release installed again under the name of one whose uninstall is not reported yet has
// a revision Secret and a heartbeat Lease of the same names: its executor runs, and the
// uninstall is reported once that executor is done (the Secret is another one, by UID).
func TestUninstallReportedAfterTheNameWasReused(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := deployedWeb(t)
		e.uninstall("web", []int{1}, false)
		e.clock.Add(time.Minute) // its executor died after Helm's purge
		e.Reserve("web", release.ActionInstall, 1)
		held := e.hold("web", 1) // the new install's executor takes the heartbeat
		if err := e.svc.Start(ctx(t), true); err != nil {
			t.Fatal(err)
		}
		testwait.For(t, func() bool { return e.Revision("web", 1).Notified == "pending-install" })
		e.sweepTombstones()
		if got := e.sink.Statuses(t); len(got) != 1 || e.tombstones() != 1 {
			t.Fatalf("reported while the new install's executor runs: %v", got)
		}
		e.Set("web", 1, helmrelease.StatusDeployed, "")
		if err := held.Release(ctx(t)); err != nil {
			t.Fatal(err)
		}
		// The pass reads Leases from the notifier's cache: it looks once the cache saw the release.
		testwait.For(t, func() bool { return e.svc.leases.get("ns", release.LeaseName("web", 1)) == nil })
		e.sweepTombstones()
		testwait.For(t, func() bool { return e.tombstones() == 0 })
		testwait.For(t, func() bool { return len(e.sink.Events()) == 3 })
		var uninstalled []events.StatusChange
		for _, ev := range e.sink.Events() {
			if c, _ := events.ParseStatus(ev); c.Status == events.StatusUninstalled {
				uninstalled = append(uninstalled, c)
			}
		}
		if len(uninstalled) != 1 || uninstalled[0].RequestID != "req-u" || uninstalled[0].Revision != 1 {
			t.Errorf("uninstalled events %+v", uninstalled)
		}
	})
}

// A hand-run helm uninstall leaves no tombstone: its purge of a record last seen
// uninstalling is reported as uninstalled, with the record's last labels.
func TestHandRunUninstallReportedFromTheDeletion(t *testing.T) {
	e := deployedWeb(t)
	if err := e.svc.Start(ctx(t), true); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, func() bool { return e.Revision("web", 1).Notified == "deployed" })
	e.Set("web", 1, helmrelease.StatusUninstalling, "Deletion in progress (or silently failed)")
	testwait.For(t, func() bool { return e.Revision("web", 1).Notified == "uninstalling" })
	if err := e.c.CoreV1().Secrets("ns").Delete(ctx(t), release.SecretName("web", 1), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, func() bool { return len(e.sink.Events()) == 3 })
	if got := e.sink.Statuses(t); !reflect.DeepEqual(got, []string{"deployed", "uninstalling", events.StatusUninstalled}) {
		t.Fatalf("sent %v", got)
	}
	if c, _ := events.ParseStatus(e.sink.Events()[2]); c.RequestID != "req-web" || c.Revision != 1 {
		t.Errorf("uninstalled %+v", c)
	}
}
