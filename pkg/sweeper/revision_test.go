package sweeper

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// What a sweep did to web v1 (checkSwept).
const (
	sweptNothing = "nothing"
	sweptRedrive = "redrive"
	sweptFail    = "fail"
)

// sweepDecisionCases are the sweeper's decisions on one pending revision, with the clock
// moved by hand (config: RedriveAfter 2m, Grace 1m, QueueDeadline 1h).
var sweepDecisionCases = []struct {
	name string
	// setup runs after the reservation of web v1 at t0; the sweep runs at the clock's time.
	setup  func(e *env)
	want   string
	reason string // in the failure's description
}{
	{"queued, just reserved", func(e *env) { e.clock.Add(time.Minute) }, sweptNothing, ""},
	{"queued, due for a re-send", func(e *env) { e.clock.Add(2 * time.Minute) }, sweptRedrive, ""},
	{"queued, re-sent recently", func(e *env) {
		e.clock.Add(10 * time.Minute)
		e.Patch("web", 1, `{"metadata":{"annotations":{"`+release.AnnotationSent+`":"1","`+release.AnnotationSentAt+`":"`+e.clock.Now().Add(-time.Minute).Format(time.RFC3339Nano)+`"}}}`)
	}, sweptNothing, ""},
	{"queued, dead-lettered at once", func(e *env) {
		e.Patch("web", 1, `{"metadata":{"annotations":{"`+release.AnnotationDeadLettered+`":"x"}}}`)
	}, sweptRedrive, ""},
	{"queued past the deadline", func(e *env) { e.clock.Add(time.Hour) }, sweptFail, "it never started: no executor took it"},
	// The revision's Lease is in the tenant's namespace: one kept "alive" there must not
	// hold a queued revision (counted toward MAX_QUEUED) past QUEUE_DEADLINE.
	{"queued past the deadline, a live Lease", func(e *env) {
		e.clock.Add(time.Hour)
		e.holdLease("web")
	}, sweptFail, "it never started: no executor took it"},
	{"queued within the deadline, a live Lease", func(e *env) {
		e.clock.Add(10 * time.Minute)
		e.holdLease("web")
	}, sweptNothing, ""},
	{"started, executor alive", func(e *env) {
		e.start("web")
		e.holdLease("web")
		e.clock.Add(2 * time.Hour) // even past the deadline: a live lease is never failed
		e.holdLease("web")
	}, sweptNothing, ""},
	{"started, lease lapsed within grace", func(e *env) {
		e.start("web")
		e.holdLease("web") // 30s lease
		e.clock.Add(80 * time.Second)
	}, sweptNothing, ""},
	{"started, lease lapsed past grace", func(e *env) {
		e.start("web")
		e.holdLease("web")
		e.clock.Add(2 * time.Minute)
	}, sweptRedrive, ""},
	{"started, executor lost past the deadline", func(e *env) {
		e.start("web")
		e.holdLease("web")
		e.clock.Add(61 * time.Minute)
	}, sweptFail, "its executor was lost"},
	{"started without a stored event (older version)", func(e *env) {
		e.start("web")
		e.Patch("web", 1, `{"data":{"`+release.DataEvent+`":null}}`)
		e.clock.Add(2 * time.Minute)
	}, sweptFail, "no stored request to send again"},
	// An executor keeps the delivered (bound) event in the record: one bound to another
	// Secret (a swapped reservation) is never re-sent.
	{"started, its stored event bound to another Secret", func(e *env) {
		e.start("web")
		e.storeBound("web", "uid-of-the-accepted-secret")
		e.clock.Add(2 * time.Minute)
	}, sweptFail, "accepted for another release record"},
	{"not ours: labels copied from an older revision", func(e *env) {
		e.Patch("web", 1, `{"metadata":{"labels":{"`+release.LabelRevision+`":"0"}}}`)
		e.clock.Add(2 * time.Hour)
	}, sweptNothing, ""},
	{"not ours: the helm CLI's", func(e *env) {
		e.Patch("web", 1, `{"metadata":{"labels":{"`+release.LabelRevision+`":null}}}`)
		e.clock.Add(2 * time.Hour)
	}, sweptNothing, ""},
	{"final already", func(e *env) {
		e.Set("web", 1, helmrelease.StatusDeployed, "")
		e.clock.Add(2 * time.Hour)
	}, sweptNothing, ""},
}

// The sweeper's decisions on one pending revision, on a fake cluster (sweepDecisionCases).
func TestSweepDecisions(t *testing.T) {
	for _, tc := range sweepDecisionCases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			stored := e.Reserve("web", release.ActionInstall, 1)
			tc.setup(e)
			before := e.Revision("web", 1)
			res, err := e.sw.SweepOnce(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			checkSwept(t, e, swept{res: res, before: before, stored: stored}, tc.want, tc.reason)
		})
	}
}

// swept is what one sweep of web v1 did: its result, the revision before it, and the
// event stored at its reservation.
type swept struct {
	res    SweepResult
	before release.Revision
	stored string
}

// checkSwept checks what the sweep did against want (nothing, redrive or fail, with
// reason in the failure's description).
func checkSwept(t *testing.T, e *env, sw swept, want, reason string) {
	t.Helper()
	status, desc := e.Status("web", 1)
	after := e.Revision("web", 1)
	switch want {
	case sweptNothing:
		if sw.res != (SweepResult{}) || len(e.redrive.Events()) != 0 || after.Sent != sw.before.Sent {
			t.Errorf("swept: %+v, %d re-sent", sw.res, len(e.redrive.Events()))
		}
		if sw.before.Status != after.Status {
			t.Errorf("status moved %s -> %s", sw.before.Status, after.Status)
		}
	case sweptRedrive:
		got := e.redrive.Events()
		if sw.res != (SweepResult{Redriven: 1}) || len(got) != 1 {
			t.Fatalf("swept %+v, re-sent %d", sw.res, len(got))
		}
		sent := got[0].Clone() // the stored event, bound to the Secret on its way out
		if uid, err := events.BoundSecret(sent, signingKey); err != nil || uid != after.UID {
			t.Errorf("re-sent bound to %q (%v), want %q", uid, err, after.UID)
		}
		sent.SetExtension(events.ExtSecretUID, nil)
		sent.SetExtension(events.ExtBinding, nil)
		if raw, _ := sent.MarshalJSON(); string(raw) != sw.stored {
			t.Errorf("re-sent event differs from the stored one:\n%s\n%s", raw, sw.stored)
		}
		if after.Sent != sw.before.Sent+1 || !after.SentAt.Equal(e.clock.Now()) || after.DeadLettered {
			t.Errorf("claim: sent %d at %v, dead-lettered %v", after.Sent, after.SentAt, after.DeadLettered)
		}
		if !release.IsPending(status.String()) {
			t.Errorf("a re-sent revision is %s", status)
		}
	case sweptFail:
		if sw.res != (SweepResult{Failed: 1}) || status != helmrelease.StatusFailed || !strings.Contains(desc, reason) {
			t.Errorf("swept %+v: %s %q, want failed with %q", sw.res, status, desc, reason)
		}
		if len(e.redrive.Events()) != 0 {
			t.Error("a failed revision was also re-sent")
		}
	}
}

// Two notifiers seeing the same revision: the claim carries the resourceVersion it saw,
// so only one sends.
func TestSweepClaimIsCompareAndSwap(t *testing.T) {
	e := newEnv(t)
	e.Reserve("web", release.ActionInstall, 1)
	e.clock.Add(3 * time.Minute)
	stale := e.Revision("web", 1)
	var res SweepResult
	if err := e.sw.sweep(ctx(t), stale, &res); err != nil || res.Redriven != 1 {
		t.Fatalf("first sweep: %+v, %v", res, err)
	}
	res = SweepResult{}
	if err := e.sw.sweep(ctx(t), stale, &res); err != nil || res.Redriven != 0 {
		t.Fatalf("a second notifier with the same view re-sent too: %+v, %v", res, err)
	}
	if n := len(e.redrive.Events()); n != 1 {
		t.Errorf("%d sends", n)
	}
}

// A refused re-send is an error of that revision, and the pass goes on.
func TestSweepRedriveRefused(t *testing.T) {
	e := newEnv(t)
	e.Reserve("a", release.ActionInstall, 1)
	e.Reserve("b", release.ActionInstall, 1)
	e.clock.Add(3 * time.Minute)
	e.redrive.Refuse(true)
	res, err := e.sw.SweepOnce(ctx(t))
	if err != nil || res.Redriven != 0 {
		t.Fatalf("%+v, %v", res, err)
	}
	// The claim stands (count 1): the next re-send waits RedriveAfter again.
	if e.Revision("a", 1).Sent != 1 || e.Revision("b", 1).Sent != 1 {
		t.Error("both revisions were claimed")
	}
}

// start drops the queued label, as Helm's adoption rewrite does.
func (e *env) start(name string) {
	e.t.Helper()
	e.Patch(name, 1, `{"metadata":{"labels":{"`+release.LabelQueued+`":null}}}`)
}

// holdLease takes (or renews by takeover) the revision's 30s lease at the clock's time.
func (e *env) holdLease(name string) {
	e.t.Helper()
	h := &lease.Heartbeat{Client: e.c, Holder: "exec", Duration: 30 * time.Second, Clock: e.clock}
	_ = e.c.CoordinationV1().Leases("ns").Delete(ctx(e.t), release.LeaseName(name, 1), deleteOpts)
	held, err := h.Hold(ctx(e.t), "ns", release.LeaseName(name, 1))
	if err != nil || held == nil {
		e.t.Fatalf("lease: %v, %v", held, err)
	}
}

var deleteOpts = metav1.DeleteOptions{}

// storeBound rewrites the revision's stored event as the delivered copy bound to uid.
func (e *env) storeBound(name string, uid types.UID) {
	e.t.Helper()
	sec, err := e.c.CoreV1().Secrets("ns").Get(ctx(e.t), release.SecretName(name, 1), metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var ev cloudevents.Event
	if err := ev.UnmarshalJSON(sec.Data[release.DataEvent]); err != nil {
		e.t.Fatal(err)
	}
	events.BindSecret(&ev, e.sw.SigningKey, uid)
	raw, _ := ev.MarshalJSON()
	sec.Data[release.DataEvent] = raw
	if _, err := e.c.CoreV1().Secrets("ns").Update(ctx(e.t), sec, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// A re-sent stored event goes out bound to the Secret it was re-sent for (the executor runs
// only bound deliveries); one whose Secret was created well after its request was accepted
// (made again under the name by a tenant) is not sent, and the revision fails with why.
func TestRedriveBindsTheStoredEventToItsSecret(t *testing.T) {
	e := newEnv(t)
	e.Reserve("web", release.ActionInstall, 1)
	e.clock.Add(3 * time.Minute)
	if res, err := e.sw.SweepOnce(ctx(t)); err != nil || res.Redriven != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
	uid := e.Revision("web", 1).UID
	if got, err := events.BoundSecret(e.redrive.Events()[0], signingKey); err != nil || got != uid {
		t.Errorf("re-sent bound to %q (%v), want %q", got, err, uid)
	}

	e.Reserve("late", release.ActionInstall, 1) // signed now, at t0+3m
	sec, err := e.c.CoreV1().Secrets("ns").Get(ctx(t), release.SecretName("late", 1), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.clock.Add(5 * time.Minute)
	if err := e.c.CoreV1().Secrets("ns").Delete(ctx(t), sec.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	remade := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: sec.Name, Namespace: "ns", Labels: sec.Labels}, Type: sec.Type, Data: sec.Data}
	if _, err := e.c.CoreV1().Secrets("ns").Create(ctx(t), remade, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(3 * time.Minute)
	if _, err := e.sw.SweepOnce(ctx(t)); err != nil {
		t.Fatal(err)
	}
	for _, ev := range e.redrive.Events() {
		if ev.Subject() == events.Subject("ns", "late") {
			t.Error("the re-made revision's stored event was re-sent")
		}
	}
	if st, desc := e.Status("late", 1); st != helmrelease.StatusFailed || !strings.Contains(desc, "after its request was accepted") {
		t.Errorf("the re-made revision: %s %q", st, desc)
	}
}

// The index may be behind the record (CI saw it): a revision listed as our queued install
// that was since deployed and then marked uninstalling by a hand-run helm uninstall (which
// rewrites the record, stored event and all) is not ours to fail. The sweep decides on the
// record it read, never on the stale listing.
func TestSweepDecidesOnTheRecordItRead(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(e *env)
		want   helmrelease.Status
	}{
		{"a hand-run helm uninstall", func(e *env) {
			e.Set("web", 1, helmrelease.StatusDeployed, "Install complete")
			e.Set("web", 1, helmrelease.StatusUninstalling, "Deletion in progress (or silently failed)")
		}, helmrelease.StatusUninstalling},
		{"deployed", func(e *env) { e.Set("web", 1, helmrelease.StatusDeployed, "Install complete") }, helmrelease.StatusDeployed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.Reserve("web", release.ActionInstall, 1)
			stale := e.Revision("web", 1) // what the index still says: our queued install
			tc.change(e)
			e.clock.Add(3 * time.Minute) // past RedriveAfter: the sweep reads the record
			var res SweepResult
			if err := e.sw.sweep(ctx(t), stale, &res); err != nil {
				t.Fatal(err)
			}
			if st, desc := e.Status("web", 1); st != tc.want || res != (SweepResult{}) {
				t.Errorf("swept %+v: the record is %s %q, want it left %s", res, st, desc, tc.want)
			}
			if n := len(e.redrive.Events()); n != 0 {
				t.Errorf("%d re-sent", n)
			}
		})
	}
}

// A tenant who rewrites a queued revision of theirs between the listing and the read (an
// annotation, every pass) does not hold it, and its MAX_QUEUED slot, past the queue
// deadline: the record read is decided on again.
func TestSweepFailsAQueuedRevisionChangedSinceListed(t *testing.T) {
	e := newEnv(t)
	e.Reserve("web", release.ActionInstall, 1)
	stale := e.Revision("web", 1)
	e.Patch("web", 1, `{"metadata":{"annotations":{"tenant.example/touched":"1"}}}`)
	e.clock.Add(2 * time.Hour)
	var res SweepResult
	if err := e.sw.sweep(ctx(t), stale, &res); err != nil {
		t.Fatal(err)
	}
	if st, desc := e.Status("web", 1); st != helmrelease.StatusFailed || !strings.Contains(desc, "never started") || res.Failed != 1 {
		t.Errorf("swept %+v: %s %q, want failed past the deadline", res, st, desc)
	}
}
