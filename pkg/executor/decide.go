package executor

import (
	"fmt"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// A delivery's path is decided before it is written: gather.go asks one question at a time
// into the view, decide reads only the view, apply.go makes the verdict's writes. A
// question is asked only once the answers before it leave the delivery open.

// question is what decide needs to know next.
type question int

const (
	qNone question = iota
	// qLook reads the record before any lease: a revision gone, final or another request's
	// needs nothing.
	qLook
	// qLease holds the revision's heartbeat Lease.
	qLease
	// qRecord reads the record again under the lease (another executor may have finished it).
	qRecord
	// qMeta reads the Secret's metadata: its UID, the labels admission counts.
	qMeta
	// qBindAccepted binds the request to the Secret submit accepted it for (a swapped one
	// is then refused for good).
	qBindAccepted
	// qBind binds the request to this Secret (consumed.Store.Consume: a create whose
	// answer says whether it is the request's first delivery).
	qBind
	// qConsumed reads the request's consumed record.
	qConsumed
	// qSteps reads how far the request's retries went.
	qSteps
	// qResume claims one more resume of the request (bounded: its answer decides).
	qResume
	// qLatest reads the release's latest revision (an uninstall acts only on it).
	qLatest
	// qCancel reads a cancel asked on the Lease.
	qCancel
)

// deed is what a decided delivery does.
type deed int

const (
	deedNone deed = iota
	deedGone
	deedDuplicate
	deedStale
	// deedHeldElsewhere asks for a redelivery: a live executor holds the revision.
	deedHeldElsewhere
	// deedRefuse acknowledges, nothing run, nothing written.
	deedRefuse
	// deedFailRefused fails the record a refused event lands on: ours, queued, this revision.
	deedFailRefused
	// deedFailResumes fails a request whose executor was lost too often.
	deedFailResumes
	// deedFailNotLatest fails an uninstall of a revision that is no longer the latest.
	deedFailNotLatest
	// deedCancelled fails, unrun, an action cancelled while its executor was lost.
	deedCancelled
	// deedRun runs Helm.
	deedRun
)

// verdict is decide's answer: a question to ask first, or the deed.
type verdict struct {
	ask question
	do  deed
	// why a refusal refuses; reason, the description of the record a deed fails.
	why, reason string
	// markDone: the request's outcome is recorded before the record is failed.
	markDone bool
	// note is logged (warn: as a warning) with kv when the deed is applied.
	note string
	warn bool
	kv   []any
}

// view is what is known of one delivery: each answer is nil until its question is asked.
type view struct {
	a events.Action
	// checked: requests are bound to their Secrets (Service.Consumed is set).
	checked bool
	look    *recordRead // before the lease
	lease   *leaseRead
	rec     *recordRead // under the lease
	meta    *metaRead
	// boundAccepted: the request is bound to the Secret submit accepted it for.
	boundAccepted bool
	bind          *bindRead
	consumed      *consumedRead
	steps         *consumed.Steps
	resume        *resumeRead
	latest        *latestRead
	cancel        *cancelRead
}

type (
	// recordRead is the release record (nil: gone) and what a refusal may do to it.
	recordRead struct {
		rel *helmrelease.Release
		// sealedQueued: submit sealed it for this request, queued, of this revision.
		sealedQueued bool
	}
	leaseRead struct{ held bool }
	// metaRead is the Secret's metadata: uid "" when it is gone.
	metaRead struct{ uid types.UID }
	bindRead struct {
		first     bool
		elsewhere error // consumed.ErrConsumedElsewhere: bound to another Secret
	}
	consumedRead struct{ rec *consumed.Record }
	resumeRead   struct{ tooMany error }
	// latestRead is the release's latest revision (nil: none).
	latestRead struct{ rev *release.Revision }
	cancelRead struct{ by string }
)

// decide chooses what a delivery does next from what is known of it.
func decide(v *view) verdict {
	switch {
	case v.look == nil:
		return verdict{ask: qLook}
	case v.lease == nil:
		return beforeLease(v)
	case !v.lease.held:
		return verdict{do: deedHeldElsewhere, note: "a live executor holds this revision; asking for redelivery"}
	case v.rec == nil:
		return verdict{ask: qRecord}
	case v.rec.rel == nil:
		return verdict{do: deedGone}
	case !release.IsPending(v.rec.rel.Info.Status.String()):
		return verdict{do: deedDuplicate}
	}
	if why := mismatch(v.a, v.rec.rel); why != "" {
		return refuse(v, why, "event refused: it does not match the record it lands on", "why", why)
	}
	if v.checked {
		if vd := decideConsumed(v); vd.ask != qNone || vd.do != deedNone {
			return vd
		}
	}
	return decideRun(v)
}

// beforeLease decides on the record read before any lease.
func beforeLease(v *view) verdict {
	rel := v.look.rel
	switch {
	case rel == nil:
		return verdict{do: deedGone, note: "reservation is gone; nothing to do"}
	case !release.IsPending(rel.Info.Status.String()):
		return verdict{do: deedDuplicate, note: "revision already final; duplicate delivery acknowledged",
			kv: []any{"status", rel.Info.Status.String()}}
	case rel.Labels[release.LabelRequestID] != v.a.RequestID:
		return verdict{do: deedStale, note: "event is for another request of this revision; acknowledged and ignored",
			kv: []any{"reservedFor", rel.Labels[release.LabelRequestID]}}
	}
	return verdict{ask: qLease}
}

// decideConsumed binds the request to this Secret, by UID, in state tenants cannot write: a
// signed event copied onto another Secret (a replay) is refused, a redelivery to the same
// Secret resumes. The zero verdict goes on to the run.
func decideConsumed(v *view) verdict {
	switch {
	case v.meta == nil:
		return verdict{ask: qMeta}
	case v.meta.uid == "":
		return verdict{do: deedGone}
	case v.a.BoundSecretUID != "" && v.a.BoundSecretUID != v.meta.uid:
		// A tenant made the reservation again under its name: the request is bound to the
		// Secret submit named, so no later delivery runs it on this one.
		if !v.boundAccepted {
			return verdict{ask: qBindAccepted}
		}
		return refuse(v, "the Secret is not the one its request was accepted for",
			"event refused: the Secret is not the one it was accepted for (a swap?)",
			"secretUID", v.meta.uid, "acceptedFor", v.a.BoundSecretUID)
	case v.bind == nil:
		return verdict{ask: qBind}
	case v.bind.elsewhere != nil:
		return refuse(v, "its request was consumed for another release record",
			"event refused: its request was consumed for another release record (a replay?)",
			"secretUID", v.meta.uid, "error", v.bind.elsewhere)
	case v.bind.first:
		return verdict{}
	}
	return decideResume(v)
}

// decideResume lets a delivery bound to a consumed request resume its action, unless the
// request already ran to its end: a namespace editor who rewrites the finished record in
// place (same UID) back to pending and posts the kept event must not get it run again.
func decideResume(v *view) verdict {
	if v.consumed == nil {
		return verdict{ask: qConsumed}
	}
	rec := v.consumed.rec
	switch {
	case rec != nil && rec.Outcome != "":
		return refuse(v, "its request already ran ("+rec.Outcome+")",
			"event refused: its request already ran (a rewound record?)", "outcome", rec.Outcome)
	case v.steps == nil:
		return verdict{ask: qSteps}
	case v.steps.Attempt > 1 || v.steps.Remediation != "":
		// This attempt is over, even if its record was rewound to pending.
		return verdict{do: deedRefuse, warn: true, note: "event refused: its request went on as a later attempt",
			kv: []any{"attempt", v.steps.Attempt, "remediation", v.steps.Remediation}}
	case v.resume == nil:
		return verdict{ask: qResume}
	case v.resume.tooMany != nil:
		return verdict{do: deedFailResumes, markDone: true,
			reason: failed(v.a.Name, fmt.Sprintf("its executor was lost too often (%v); not run again", v.resume.tooMany))}
	}
	return verdict{}
}

// decideRun checks what may still stop an admitted action before Helm runs.
func decideRun(v *view) verdict {
	uninstall := v.a.Action == release.ActionUninstall
	switch {
	case uninstall && v.latest == nil:
		return verdict{ask: qLatest}
	case uninstall && v.latest.rev != nil && v.latest.rev.Version != v.a.Revision:
		// An upgrade reserved in the same instant as the mark wins: the uninstall fails.
		r := v.latest.rev
		return verdict{do: deedFailNotLatest, reason: fmt.Sprintf(
			"Uninstall of %q failed: revision %d (%s) was reserved after revision %d was marked; nothing was deleted",
			v.a.Name, r.Version, r.Status, v.a.Revision)}
	case v.cancel == nil:
		return verdict{ask: qCancel}
	case v.cancel.by != "":
		// Asked while its executor was lost: the outcome is recorded first, so that a
		// redelivery is refused whatever the tenant makes of the record meanwhile.
		return verdict{do: deedCancelled, markDone: v.checked, reason: failed(v.a.Name, "cancelled by "+v.cancel.by)}
	}
	return verdict{do: deedRun}
}

// refuse acknowledges an event refused on the record it lands on. A record submit sealed
// for this request and still queued would wait for QUEUE_DEADLINE, every re-send refused
// the same way, so it is failed now; one without our seal is not ours to touch.
func refuse(v *view, why, note string, kv ...any) verdict {
	vd := verdict{do: deedRefuse, why: why, note: note, warn: true, kv: kv}
	if v.rec.sealedQueued {
		vd.do = deedFailRefused
		vd.reason = failed(v.a.Name, fmt.Sprintf("revision %d was refused by the executor: %s; nothing ran", v.a.Revision, why))
	}
	return vd
}

// failed is the description of a failed action, in Helm's words.
func failed(name, why string) string { return fmt.Sprintf("Release %q failed: %s", name, why) }

// mismatch says why an event does not belong to the record it lands on ("" when it does).
func mismatch(a events.Action, rel *helmrelease.Release) string {
	switch {
	case rel.Name != a.Name || rel.Namespace != a.Namespace || rel.Version != a.Revision:
		return fmt.Sprintf("the record is %s/%s v%d", rel.Namespace, rel.Name, rel.Version)
	case rel.Labels[release.LabelRequestID] != a.RequestID:
		return fmt.Sprintf("the record was reserved for request %q", rel.Labels[release.LabelRequestID])
	case rel.Info.Status.String() != a.Action.PendingStatus():
		return fmt.Sprintf("the record is %s, not %s", rel.Info.Status, a.Action.PendingStatus())
	}
	return ""
}
