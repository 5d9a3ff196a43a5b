// Package consumed records which accepted events were acted on, as a Lease per request id
// in async-helm's own namespace, which tenants cannot write: an event is bound to the one
// reservation Secret (by UID) it was first consumed for, whatever a tenant copies or relabels.
package consumed

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/pkg/wallclock"
)

// DefaultNamespace is async-helm's own namespace when ASYNC_HELM_NAMESPACE is not set.
const DefaultNamespace = "async-helm"

// Label marks a consumed record (Prune lists by it).
const Label = "async-helm.io/consumed"

const (
	annRequestID = "async-helm.io/request-id"
	annNamespace = "async-helm.io/namespace"
	annName      = "async-helm.io/name"
	annAction    = "async-helm.io/action"
	annRevision  = "async-helm.io/revision"
	annSecretUID = "async-helm.io/secret-uid"
	annAt        = "async-helm.io/consumed-at"
	annOutcome   = "async-helm.io/outcome"
)

// OutcomeUninstalled (Record.Outcome): Helm's uninstall of the request returned without
// error. Only the executor writes it (MarkDone), here where tenants cannot: the notifier
// reports "uninstalled" from it, never from the tombstone Lease in the tenant's namespace.
const OutcomeUninstalled = "uninstalled"

// OutcomeCancelled and OutcomeNotAccepted are submit's, written when it binds a request
// that must never run: cancelled before it ran, or not accepted (its event was not sent: 503).
const (
	OutcomeCancelled   = "cancelled"
	OutcomeNotAccepted = "not-accepted"
)

// maxRequestIDBytes bounds what is stored: request ids come from signed events, but a
// record is not the place to keep an arbitrary blob.
const maxRequestIDBytes = 253

// ErrConsumedElsewhere: the request id was already consumed for another reservation Secret.
var ErrConsumedElsewhere = errors.New("request already consumed for another release record")

// ErrInvalid: the record cannot be stored (empty or oversized request id, no UID).
var ErrInvalid = errors.New("invalid consumed record")

// Record is what a consumed request was bound to.
type Record struct {
	RequestID, Namespace, Name, Action string
	Revision                           int
	SecretUID                          types.UID
	At                                 time.Time
	// Outcome is what the executor recorded the action did (MarkDone); "" until then.
	Outcome string
}

// Store keeps the records as Leases in Namespace (DefaultNamespace when empty).
type Store struct {
	Client    kubernetes.Interface
	Namespace string
	// Clock dates the records and the prune's cutoff (nil: the wall clock).
	Clock clock.PassiveClock
}

// LeaseName is the record's name for a request id: a hash, so any id gives a valid name.
func LeaseName(requestID string) string {
	h := sha256.Sum256([]byte(requestID))
	return "consumed-" + hex.EncodeToString(h[:20])
}

func (s *Store) ns() string {
	if s.Namespace == "" {
		return DefaultNamespace
	}
	return s.Namespace
}

// Consume binds r.RequestID to r.SecretUID. first is true when this call created the
// record; false with a nil error when it already existed for the same UID (a redelivery
// resumes); ErrConsumedElsewhere when it exists for another UID.
func (s *Store) Consume(ctx context.Context, r Record) (first bool, err error) {
	if r.RequestID == "" || len(r.RequestID) > maxRequestIDBytes || r.SecretUID == "" {
		return false, fmt.Errorf("%w: request id %q, secret uid %q", ErrInvalid, r.RequestID, r.SecretUID)
	}
	if r.At.IsZero() {
		r.At = wallclock.Or(s.Clock).Now()
	}
	_, err = s.Client.CoordinationV1().Leases(s.ns()).Create(ctx, toLease(r), metav1.CreateOptions{})
	if err == nil {
		return true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("consume request %s: %w", r.RequestID, err)
	}
	got, err := s.Lookup(ctx, r.RequestID)
	if err != nil {
		return false, err
	}
	if got == nil { // pruned between our create and read: try once more
		if _, err := s.Client.CoordinationV1().Leases(s.ns()).Create(ctx, toLease(r), metav1.CreateOptions{}); err != nil {
			return false, fmt.Errorf("consume request %s: %w", r.RequestID, err)
		}
		return true, nil
	}
	if got.SecretUID != r.SecretUID {
		return false, fmt.Errorf("%w: request %s is bound to %s, not %s", ErrConsumedElsewhere, r.RequestID, got.SecretUID, r.SecretUID)
	}
	return false, nil
}

// MarkDone records the outcome of the request's action on its record (which must exist:
// the executor consumed it first), with a read and a conditional update: the executor's role
// may get and update Leases, not patch them.
func (s *Store) MarkDone(ctx context.Context, requestID, outcome string) error {
	return s.annotate(ctx, requestID, annOutcome, outcome, "record the outcome of")
}

// annotate sets one annotation of the request's record in one merge patch (no read
// first); a record that does not exist is an error (nothing is created here).
func (s *Store) annotate(ctx context.Context, requestID, key, value, what string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{key: value}}})
	if err == nil {
		_, err = s.Client.CoordinationV1().Leases(s.ns()).Patch(ctx, LeaseName(requestID), types.MergePatchType, patch, metav1.PatchOptions{})
	}
	if err != nil {
		return fmt.Errorf("%s request %s: %w", what, requestID, err)
	}
	return nil
}

// Lookup reads the record of a request id; nil, nil when there is none.
func (s *Store) Lookup(ctx context.Context, requestID string) (*Record, error) {
	l, err := s.Client.CoordinationV1().Leases(s.ns()).Get(ctx, LeaseName(requestID), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("look up consumed request %s: %w", requestID, err)
	}
	r, ok := fromLease(l)
	if !ok || r.RequestID != requestID {
		// Only async-helm writes here, but a record it cannot read must not pass as "none"
		// (that would let the id be consumed again): treat it as bound to nothing we hold.
		return &Record{RequestID: requestID, SecretUID: "unreadable:" + l.UID}, nil
	}
	return &r, nil
}

// Prune deletes the records consumed longer than olderThan ago and answers how many went.
func (s *Store) Prune(ctx context.Context, olderThan time.Duration) (int, error) {
	leases := s.Client.CoordinationV1().Leases(s.ns())
	list, err := leases.List(ctx, metav1.ListOptions{LabelSelector: Label + "=true"})
	if err != nil {
		return 0, fmt.Errorf("list consumed requests: %w", err)
	}
	cutoff := wallclock.Or(s.Clock).Now().Add(-olderThan)
	n := 0
	for i := range list.Items {
		l := &list.Items[i]
		if at, ok := consumedAt(l); ok && !at.Before(cutoff) {
			continue
		}
		uid, rv := l.UID, l.ResourceVersion
		err := leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid, ResourceVersion: &rv}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return n, fmt.Errorf("prune consumed request %s: %w", l.Name, err)
		}
		if err == nil {
			n++
		}
	}
	return n, nil
}

func toLease(r Record) *coordinationv1.Lease {
	l := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name:   LeaseName(r.RequestID),
			Labels: map[string]string{Label: "true"},
			Annotations: map[string]string{
				annRequestID: r.RequestID,
				annNamespace: r.Namespace,
				annName:      r.Name,
				annAction:    r.Action,
				annRevision:  strconv.Itoa(r.Revision),
				annSecretUID: string(r.SecretUID),
				annAt:        r.At.UTC().Format(time.RFC3339Nano),
			},
		},
	}
	if r.Outcome != "" {
		l.Annotations[annOutcome] = r.Outcome
	}
	return l
}

func fromLease(l *coordinationv1.Lease) (Record, bool) {
	a := l.Annotations
	rev, err := strconv.Atoi(a[annRevision])
	at, ok := consumedAt(l)
	if err != nil || !ok || a[annRequestID] == "" || a[annSecretUID] == "" {
		return Record{}, false
	}
	return Record{
		RequestID: a[annRequestID], Namespace: a[annNamespace], Name: a[annName], Action: a[annAction],
		Revision: rev, SecretUID: types.UID(a[annSecretUID]), At: at, Outcome: a[annOutcome],
	}, true
}

// TenantOf reads the tenant namespace and the time of a consumed record from its metadata
// (the ledger counts the records per tenant); ok is false when they cannot be read.
func TenantOf(m metav1.Object) (namespace string, at time.Time, ok bool) {
	a := m.GetAnnotations()
	at, err := time.Parse(time.RFC3339Nano, a[annAt])
	return a[annNamespace], at, err == nil && a[annNamespace] != ""
}

func consumedAt(l *coordinationv1.Lease) (time.Time, bool) {
	at, err := time.Parse(time.RFC3339Nano, l.Annotations[annAt])
	return at, err == nil
}
