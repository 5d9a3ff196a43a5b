package executor

import (
	"errors"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// rec is the record of install "r" v1 for request "id" in status st, labels added.
func rec(st helmrelease.Status, labels ...string) *helmrelease.Release {
	l := map[string]string{release.LabelRequestID: "id"}
	for i := 0; i+1 < len(labels); i += 2 {
		l[labels[i]] = labels[i+1]
	}
	return &helmrelease.Release{Name: "r", Namespace: "ns", Version: 1, Labels: l, Info: &helmrelease.Info{Status: st}}
}

// admitted is the view of a first delivery whose answers so far all let it go on.
func admitted() *view {
	pending := &recordRead{rel: rec(helmrelease.StatusPendingInstall)}
	return &view{a: events.Action{Action: release.ActionInstall, Namespace: "ns", Name: "r", Revision: 1, RequestID: "id"},
		checked: true, look: pending, lease: &leaseRead{held: true}, rec: pending,
		meta: &metaRead{uid: "u1"}}
}

// with returns admitted() changed by f.
func with(f func(v *view)) *view {
	v := admitted()
	f(v)
	return v
}

// resumed is a redelivery bound to its record by an earlier one.
func resumed(f func(v *view)) *view {
	return with(func(v *view) {
		v.bind = &bindRead{}
		v.consumed = &consumedRead{rec: &consumed.Record{RequestID: "id", SecretUID: "u1"}}
		f(v)
	})
}

// What a delivery does next, for each thing known of it: a question, or its deed.
func TestDecideDelivery(t *testing.T) {
	tooMany := errors.New("too many resumes")
	for _, tc := range []struct {
		name string
		v    *view
		ask  question
		do   deed
	}{
		{"nothing known", &view{}, qLook, deedNone},
		{"gone before the lease", with(func(v *view) { v.look, v.lease = &recordRead{}, nil }), qNone, deedGone},
		{"final, not queued", with(func(v *view) { v.look, v.lease = &recordRead{rel: rec(helmrelease.StatusDeployed)}, nil }), qNone, deedDuplicate},
		{"final, still queued", with(func(v *view) {
			v.look, v.lease = &recordRead{rel: rec(helmrelease.StatusDeployed, release.LabelQueued, "true")}, nil
		}), qNone, deedDuplicate},
		{"another request's", with(func(v *view) {
			v.look, v.lease = &recordRead{rel: rec(helmrelease.StatusPendingInstall, release.LabelRequestID, "other")}, nil
		}), qNone, deedStale},
		{"pending: hold the lease", with(func(v *view) { v.lease = nil }), qLease, deedNone},
		{"held elsewhere", with(func(v *view) { v.lease = &leaseRead{} }), qNone, deedHeldElsewhere},
		{"under the lease: read again", with(func(v *view) { v.rec = nil }), qRecord, deedNone},
		{"gone under the lease", with(func(v *view) { v.rec = &recordRead{} }), qNone, deedGone},
		{"final under the lease", with(func(v *view) { v.rec = &recordRead{rel: rec(helmrelease.StatusFailed)} }), qNone, deedDuplicate},
		{"another action's record", with(func(v *view) { v.a.Action = release.ActionUpgrade }), qNone, deedRefuse},
		{"another action's sealed record", with(func(v *view) { v.a.Action, v.rec.sealedQueued = release.ActionUpgrade, true }), qNone, deedFailRefused},
		{"unchecked: no cancel read yet", with(func(v *view) { v.checked, v.meta = false, nil }), qCancel, deedNone},
		{"unchecked runs", with(func(v *view) { v.checked, v.meta, v.cancel = false, nil, &cancelRead{} }), qNone, deedRun},
		{"metadata", with(func(v *view) { v.meta = nil }), qMeta, deedNone},
		{"Secret gone", with(func(v *view) { v.meta = &metaRead{} }), qNone, deedGone},
		{"swapped: bind to the accepted Secret", with(func(v *view) { v.a.BoundSecretUID = "u0" }), qBindAccepted, deedNone},
		{"swapped, bound", with(func(v *view) { v.a.BoundSecretUID, v.boundAccepted = "u0", true }), qNone, deedRefuse},
		{"bound to its Secret: bind", with(func(v *view) { v.a.BoundSecretUID = "u1" }), qBind, deedNone},
		{"consumed elsewhere", with(func(v *view) { v.bind = &bindRead{elsewhere: consumed.ErrConsumedElsewhere} }), qNone, deedRefuse},
		{"first: cancel read", with(func(v *view) { v.bind = &bindRead{first: true} }), qCancel, deedNone},
		{"first, cancelled", with(func(v *view) { v.bind, v.cancel = &bindRead{first: true}, &cancelRead{by: "bob"} }), qNone, deedCancelled},
		{"first runs", with(func(v *view) { v.bind, v.cancel = &bindRead{first: true}, &cancelRead{} }), qNone, deedRun},
		{"bound before: look it up", with(func(v *view) { v.bind = &bindRead{} }), qConsumed, deedNone},
		{"resumed: steps", resumed(func(v *view) {}), qSteps, deedNone},
		{"already ran", resumed(func(v *view) { v.consumed.rec.Outcome = "deployed" }), qNone, deedRefuse},
		{"went on as a retry", resumed(func(v *view) { v.steps = &consumed.Steps{Attempt: 2} }), qNone, deedRefuse},
		{"went on as a remediation", resumed(func(v *view) { v.steps = &consumed.Steps{Attempt: 1, Remediation: "rollback"} }), qNone, deedRefuse},
		{"claim a resume", resumed(func(v *view) { v.steps = &consumed.Steps{Attempt: 1} }), qResume, deedNone},
		{"lost too often", resumed(func(v *view) { v.steps, v.resume = &consumed.Steps{Attempt: 1}, &resumeRead{tooMany: tooMany} }), qNone, deedFailResumes},
		{"resumes", resumed(func(v *view) {
			v.steps, v.resume, v.cancel = &consumed.Steps{Attempt: 1}, &resumeRead{}, &cancelRead{}
		}), qNone, deedRun},
		{"uninstall: latest", with(func(v *view) { uninstall(v); v.bind = &bindRead{first: true} }), qLatest, deedNone},
		{"uninstall of an older revision", with(func(v *view) {
			uninstall(v)
			v.bind, v.latest = &bindRead{first: true}, &latestRead{rev: &release.Revision{Version: 2}}
		}), qNone, deedFailNotLatest},
		{"uninstall of the latest", with(func(v *view) {
			uninstall(v)
			v.bind, v.latest, v.cancel = &bindRead{first: true}, &latestRead{rev: &release.Revision{Version: 1}}, &cancelRead{}
		}), qNone, deedRun},
		{"uninstall, no history", with(func(v *view) {
			uninstall(v)
			v.bind, v.latest, v.cancel = &bindRead{first: true}, &latestRead{}, &cancelRead{}
		}), qNone, deedRun},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decide(tc.v)
			if got.ask != tc.ask || got.do != tc.do {
				t.Errorf("decide = ask %d do %d, want ask %d do %d", got.ask, got.do, tc.ask, tc.do)
			}
		})
	}
}

// uninstall makes v an uninstall's delivery onto its marked record.
func uninstall(v *view) {
	v.a.Action = release.ActionUninstall
	marked := &recordRead{rel: rec(helmrelease.StatusUninstalling)}
	v.look, v.rec = marked, marked
}

// What a verdict records: the outcome first, so that a redelivery is refused whatever the
// tenant makes of the record meanwhile.
func TestDecideRecordsTheOutcomeFirst(t *testing.T) {
	cancelled := decide(with(func(v *view) { v.bind, v.cancel = &bindRead{first: true}, &cancelRead{by: "bob"} }))
	if cancelled.do != deedCancelled || !cancelled.markDone {
		t.Errorf("a cancel found on the lease: got do %d markDone %v", cancelled.do, cancelled.markDone)
	}
	lost := decide(resumed(func(v *view) { v.steps, v.resume = &consumed.Steps{Attempt: 1}, &resumeRead{tooMany: errors.New("5")} }))
	if lost.do != deedFailResumes || !lost.markDone {
		t.Errorf("lost too often: got do %d markDone %v", lost.do, lost.markDone)
	}
}
