// Package release is the release model of async-helm: names of Helm release secrets,
// statuses, and the reservation of a revision in Helm's storage format (docs/design.md, "The
// reservation contract"). Its Store is the one door to the records and the Leases beside
// them; pkg/release/storage (Helm's driver) and pkg/release/lease sit below it.
package release

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/async-helm/async-helm/pkg/release/lease"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// Labels Helm's Secrets driver puts on every release secret, plus ours.
const (
	LabelOwner     = "owner"
	LabelName      = "name"
	LabelStatus    = "status"
	LabelVersion   = "version"
	OwnerHelm      = "helm"
	LabelRequestID = lease.LabelRequestID
	// LabelModifiedAt is Helm's label of a release secret's last write (unix seconds).
	LabelModifiedAt = "modifiedAt"
	// LabelChart is "<chart>-<version>", so watchers see the chart without decoding payloads.
	LabelChart = lease.LabelChart
	// AnnotationNotified is the status the notifier last reported for a revision. Helm's
	// driver rewrites the whole secret on every status change, which drops it: a mismatch
	// (or absence) means an unreported transition.
	AnnotationNotified = "async-helm.io/notified"
	// AnnotationNotifiedSig is the notifier's signature of AnnotationNotified for this record
	// (pkg/notifier): a mark without it, or signed for another record, counts as none.
	AnnotationNotifiedSig = "async-helm.io/notified-sig"
	// SecretType is the type Helm 3 gives its release secrets.
	SecretType = "helm.sh/release.v1"

	// LabelRevision marks a revision as async-helm's own, but only while it equals Helm's
	// "version" label: Helm copies custom labels into the later revisions that the helm
	// CLI or Flux write, and those must never be touched by the sweeper.
	LabelRevision = lease.LabelRevision
	// LabelAction=uninstall marks the Secret an async uninstall marked, and its tombstone.
	LabelAction = lease.LabelAction
	// LabelQueued marks a reservation accepted but not started. Helm's adoption rewrite
	// of the secret drops it.
	LabelQueued = "async-helm.io/queued"
	// DataEvent is the key of the signed accepted event in a pending revision's secret:
	// the durable copy of the work, which the notifier re-sends when a delivery was lost.
	DataEvent = "async-helm.io.event"
	// AnnotationSent counts the sweeper's re-sends of the stored event, and
	// AnnotationSentAt says when the last one was claimed (RFC 3339).
	AnnotationSent   = "async-helm.io/sent"
	AnnotationSentAt = "async-helm.io/sent-at"
	// AnnotationDeadLettered is set when the broker gave up on the revision's event: the
	// sweeper re-sends it at its next pass.
	AnnotationDeadLettered = "async-helm.io/dead-lettered"
)

// SecretsResource is the resource Helm stores releases in.
var SecretsResource = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// Action is what a request asks Helm to do.
type Action string

// Actions async-helm runs.
const (
	ActionInstall   Action = "install"
	ActionUpgrade   Action = "upgrade"
	ActionUninstall Action = lease.ActionUninstall
	ActionRollback  Action = "rollback"
)

// StatusUninstalling is Helm's status of a release being uninstalled; async-helm marks the
// latest revision with it when it accepts an uninstall (see MarkUninstalling).
const StatusUninstalling = "uninstalling"

// PendingStatus is the status a reservation of this action carries.
func (a Action) PendingStatus() string {
	switch a {
	case ActionUpgrade:
		return "pending-upgrade"
	case ActionRollback:
		return "pending-rollback"
	case ActionUninstall:
		return StatusUninstalling
	}
	return "pending-install"
}

// PendingAction is the action a pending status belongs to (PendingStatus's inverse).
func PendingAction(status string) (Action, bool) {
	for _, a := range []Action{ActionInstall, ActionUpgrade, ActionRollback, ActionUninstall} {
		if a.PendingStatus() == status {
			return a, true
		}
	}
	return "", false
}

// Sentinel errors; the HTTP edge maps them to status codes with errors.Is.
var (
	ErrNameInUse = errors.New("release name is in use")
	// ErrNotFound is worded as Helm's driver.ErrReleaseNotFound, which the console forwards and
	// clients match (the unmodified oc-helm's `upgrade --install`).
	ErrNotFound = errors.New("release: not found")
	ErrPending  = errors.New("an operation is already pending on the release")
	// ErrConflict is storage.ErrConflict, which the adopting driver returns.
	ErrConflict = storage.ErrConflict
)

// PendingError names the revision that blocks a new operation.
type PendingError struct {
	Revision int
	Status   string
}

func (e *PendingError) Error() string {
	return fmt.Sprintf("%s: revision %d is %s", ErrPending, e.Revision, e.Status)
}

// Is makes errors.Is(err, ErrPending) true.
func (e *PendingError) Is(target error) bool { return target == ErrPending }

// SecretName is the name of the secret that holds one revision of a release: the key
// Helm's storage keeps it under (storage.Key).
func SecretName(release string, revision int) string { return storage.Key(release, revision) }

// IsPending reports whether a Helm status means an action is still running; an accepted
// uninstall too: nothing else may start, and the sweeper drives it like a reservation.
func IsPending(status string) bool {
	return status == "pending-install" || status == "pending-upgrade" || status == "pending-rollback" ||
		status == StatusUninstalling
}

// Revision is what the labels of one release secret say, without its payload.
type Revision struct {
	Namespace, Name, Status, RequestID, SecretName, Chart, Notified string
	// NotifiedSig is AnnotationNotifiedSig: the notifier alone can tell whether it is valid.
	NotifiedSig     string
	Version         int
	ResourceVersion string
	// Ours: async-helm wrote this revision (LabelRevision equals the version) and, when it
	// is uninstalling, marked it so (LabelAction): Helm's own uninstall keeps our labels on
	// the revision it marks, and a hand-run one is not ours to drive or fail.
	Ours bool
	// Queued: accepted, not started (not adopted by an executor yet).
	Queued bool
	// Sent is how often the sweeper re-sent the stored event, last at SentAt.
	Sent         int
	SentAt       time.Time
	DeadLettered bool
	Created      time.Time
	// UID is the Secret's; Failure is AnnotationFailure (MarkUndecodable's reason).
	UID     types.UID
	Failure string
}

// RevisionFromMeta reads a release secret's labels; ok is false for other secrets.
func RevisionFromMeta(m metav1.Object) (Revision, bool) {
	l := m.GetLabels()
	if l[LabelOwner] != OwnerHelm || l[LabelName] == "" {
		return Revision{}, false
	}
	v, err := strconv.Atoi(l[LabelVersion])
	if err != nil {
		return Revision{}, false
	}
	a := m.GetAnnotations()
	r := Revision{
		Namespace: m.GetNamespace(), Name: l[LabelName], Status: l[LabelStatus], Version: v,
		RequestID: l[LabelRequestID], SecretName: m.GetName(), ResourceVersion: m.GetResourceVersion(),
		Chart: l[LabelChart], Notified: a[AnnotationNotified], NotifiedSig: a[AnnotationNotifiedSig],
		Ours: l[LabelRevision] == l[LabelVersion] && (l[LabelStatus] != StatusUninstalling || l[LabelAction] == string(ActionUninstall)) &&
			// Labels that name another Secret are a decoy: acting on them would fail or
			// re-send that other record.
			m.GetName() == SecretName(l[LabelName], v),
		Queued:       l[LabelQueued] == "true",
		DeadLettered: a[AnnotationDeadLettered] != "",
		Created:      m.GetCreationTimestamp().Time,
		UID:          m.GetUID(), Failure: a[AnnotationFailure],
	}
	if r.Status == StatusUninstalling {
		// The revision was created long before its uninstall was accepted: the sweeper's
		// clock (re-send, queue deadline) starts at the mark (MarkUninstalling), which Helm's
		// modifiedAt label records.
		if at, err := strconv.ParseInt(l[LabelModifiedAt], 10, 64); err == nil {
			r.Created = time.Unix(at, 0)
		}
	}
	r.Sent, _ = strconv.Atoi(a[AnnotationSent])
	r.SentAt, _ = time.Parse(time.RFC3339Nano, a[AnnotationSentAt])
	return r, true
}

// ChartLabel is the value of LabelChart for a chart, or "" when it is not a valid label value.
// A label cannot hold "+", so build metadata is written with "_" (ParseChartLabel reverses it).
func ChartLabel(name, version string) string {
	v := name + "-" + strings.ReplaceAll(version, "+", "_")
	if len(validation.IsValidLabelValue(v)) > 0 {
		return ""
	}
	return v
}

// Labels are the labels async-helm adds to the release secrets of one request for revision.
func Labels(requestID string, revision int, chartName, chartVersion string) map[string]string {
	l := map[string]string{LabelRequestID: requestID, LabelRevision: strconv.Itoa(revision)}
	if c := ChartLabel(chartName, chartVersion); c != "" {
		l[LabelChart] = c
	}
	return l
}
