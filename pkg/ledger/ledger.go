// Package ledger is admission's account of accepted, not yet consumed requests: Leases in
// async-helm's own namespace, which tenants cannot write (one per request or group commit),
// cleared by the request's consumed record. Submit counts them per tenant (Book) and admits
// from the counts (Decide).
package ledger

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// Label marks a ledger entry (the Book watches by it).
const Label = "async-helm.io/ledger"

// AnnNamespace is the annotation of an entry naming the tenant namespace its request acts in.
const AnnNamespace = annNamespace

const (
	annRequestID = "async-helm.io/request-id"
	annNamespace = "async-helm.io/namespace"
	annCaller    = "async-helm.io/caller"
	annSecret    = "async-helm.io/secret"
	annAt        = "async-helm.io/accepted-at"
)

// namePrefix and consumedPrefix name an entry and its request's consumed record after the
// same hash of the request id, so the Book pairs them by name alone. A Lease holding the
// entries of one group commit (batch.go) is named batchPrefix and a random suffix instead.
const (
	namePrefix     = "ledger-"
	consumedPrefix = "consumed-"
)

// Entry is one accepted request that no executor has consumed yet.
type Entry struct {
	RequestID string
	// Namespace is the tenant namespace the request acts in.
	Namespace string
	// Caller is the caller's share key (CallerKey); "" when authentication is off.
	Caller string
	// SecretName is the revision's Secret (the reservation, or the marked revision of an
	// uninstall): what a list shows the queue position on.
	SecretName string
	// At is when submit accepted the request.
	At time.Time
}

// CallerKey is the caller's share of the ledger: a hash of auth.Share (the ServiceAccounts
// of one namespace are one caller). "" for no user.
func CallerKey(user string) string {
	if user == "" {
		return ""
	}
	h := sha256.Sum256([]byte(auth.Share(user)))
	return hex.EncodeToString(h[:20])
}

// Name is the entry's Lease name for a request id (consumed.LeaseName's hash).
func Name(requestID string) string {
	return namePrefix + strings.TrimPrefix(consumed.LeaseName(requestID), consumedPrefix)
}

// Store writes the entries, as Leases in Namespace (consumed.DefaultNamespace when empty).
type Store struct {
	Client    kubernetes.Interface
	Namespace string
}

func (s *Store) ns() string {
	if s.Namespace == "" {
		return consumed.DefaultNamespace
	}
	return s.Namespace
}

// Add records an accepted request: the one write admission adds on the path to 201.
func (s *Store) Add(ctx context.Context, e Entry) error {
	_, err := s.Client.CoordinationV1().Leases(s.ns()).Create(ctx, toLease(e), metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("record accepted request %s in the ledger: %w", e.RequestID, err)
	}
	return nil
}

// AddBatch records several accepted requests in one Lease (a group commit, batch.go) and
// returns its name.
func (s *Store) AddBatch(ctx context.Context, es []Entry) (string, error) {
	l, err := toBatchLease(es)
	if err != nil {
		return "", err
	}
	if _, err := s.Client.CoordinationV1().Leases(s.ns()).Create(ctx, l, metav1.CreateOptions{}); err != nil {
		return "", fmt.Errorf("record %d accepted requests in the ledger: %w", len(es), err)
	}
	return l.Name, nil
}

// Delete removes the entry of Lease name; one already gone is no error.
func (s *Store) Delete(ctx context.Context, name string) error {
	err := s.Client.CoordinationV1().Leases(s.ns()).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("delete ledger entry %s: %w", name, err)
	}
	return nil
}

func toLease(e Entry) *coordinationv1.Lease {
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name:   Name(e.RequestID),
		Labels: map[string]string{Label: "true"},
		Annotations: map[string]string{
			annRequestID: e.RequestID, annNamespace: e.Namespace, annCaller: e.Caller,
			annSecret: e.SecretName, annAt: e.At.UTC().Format(time.RFC3339Nano),
		},
	}}
}

// EntriesOf reads the entries a ledger Lease holds: one (Add's) or a batch (AddBatch's);
// ok is false for anything else.
func EntriesOf(m metav1.Object) ([]Entry, bool) {
	if es, ok := batchFromMeta(m); ok {
		return es, true
	}
	if e, ok := fromMeta(m); ok {
		return []Entry{e}, true
	}
	return nil, false
}

// fromMeta reads an entry from its Lease's metadata; ok is false for anything else.
func fromMeta(m metav1.Object) (Entry, bool) {
	a := m.GetAnnotations()
	at, err := time.Parse(time.RFC3339Nano, a[annAt])
	if m.GetLabels()[Label] != "true" || err != nil || a[annRequestID] == "" || a[annNamespace] == "" ||
		m.GetName() != Name(a[annRequestID]) {
		return Entry{}, false
	}
	return Entry{RequestID: a[annRequestID], Namespace: a[annNamespace], Caller: a[annCaller],
		SecretName: a[annSecret], At: at}, true
}

// hashOf is the request hash a ledger entry's or a consumed record's name carries.
func hashOf(name string) (string, bool) {
	if h, ok := strings.CutPrefix(name, namePrefix); ok {
		return h, true
	}
	return strings.CutPrefix(name, consumedPrefix)
}
