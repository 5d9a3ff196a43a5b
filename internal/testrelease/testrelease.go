// Package testrelease holds release records on a fake cluster (internal/fakekube) for the
// unit tests of the notifier and the sweeper: reservations as submit makes them, rewrites
// as Helm and namespace editors make them, and a sink that records events.
package testrelease

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// T0 is the fake clock's start.
var T0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// SigningKey is submit's key in these tests.
var SigningKey = []byte("0123456789abcdef0123456789abcdef")

// Cluster is a fake cluster at T0 and the release Store over it; every record is in
// namespace "ns" unless said otherwise.
type Cluster struct {
	T     *testing.T
	C     *fakekube.Cluster
	Clock *fakekube.Clock
	Store *release.Store
}

// New is an empty Cluster.
func New(t *testing.T) *Cluster {
	t.Helper()
	clock := fakekube.NewClock(T0)
	c := fakekube.New(clock)
	return &Cluster{T: t, C: c, Clock: clock, Store: &release.Store{Client: c, Metadata: c.Metadata(), Clock: clock}}
}

// Ctx is a context that ends with the test (or after 20 s).
func Ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// Signed is the accepted event of a as submit signs it now, as stored in a reservation.
func (e *Cluster) Signed(a events.Action) []byte {
	e.T.Helper()
	ev, err := events.NewAccepted(a)
	if err != nil {
		e.T.Fatal(err)
	}
	events.Sign(&ev, SigningKey, e.Clock.Now())
	stored, err := ev.MarshalJSON()
	if err != nil {
		e.T.Fatal(err)
	}
	return stored
}

// Reserve makes a reservation as submit does, with its signed-event copy.
func (e *Cluster) Reserve(name string, action release.Action, rev int) string {
	e.T.Helper()
	stored := e.Signed(events.Action{Action: action, Namespace: "ns", Name: name, Revision: rev,
		SecretName: release.SecretName(name, rev), RequestID: "req-" + name})
	if _, err := e.Store.Reserve(Ctx(e.T), release.Reservation{Namespace: "ns", Name: name, Action: action, Revision: rev,
		Chart: &chart.Metadata{Name: "tiny", Version: "1.0.0"}, RequestID: "req-" + name, Event: stored}); err != nil {
		e.T.Fatal(err)
	}
	return string(stored)
}

// Set rewrites a revision as Helm does (status, description; the queued label dropped
// when the status changes, as Helm's adoption does).
func (e *Cluster) Set(name string, rev int, status helmrelease.Status, desc string) {
	e.T.Helper()
	d := storage.NewSecrets(e.C.CoreV1().Secrets("ns"))
	rel, err := d.Get(release.SecretName(name, rev))
	if err != nil {
		e.T.Fatal(err)
	}
	rel.Info.Status, rel.Info.Description = status, desc
	delete(rel.Labels, release.LabelQueued)
	if err := d.Update(release.SecretName(name, rev), rel); err != nil {
		e.T.Fatal(err)
	}
}

// Patch merge-patches the metadata of a revision's secret.
func (e *Cluster) Patch(name string, rev int, patch string) {
	e.T.Helper()
	if _, err := e.C.CoreV1().Secrets("ns").Patch(Ctx(e.T), release.SecretName(name, rev), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// Meta is the metadata of a revision's secret.
func (e *Cluster) Meta(name string, rev int) *metav1.PartialObjectMetadata {
	e.T.Helper()
	m, err := e.C.Metadata().Resource(release.SecretsResource).Namespace("ns").Get(Ctx(e.T), release.SecretName(name, rev), metav1.GetOptions{})
	if err != nil {
		e.T.Fatal(err)
	}
	return m
}

// Revision is a revision as its labels say.
func (e *Cluster) Revision(name string, rev int) release.Revision {
	e.T.Helper()
	r, ok := release.RevisionFromMeta(e.Meta(name, rev))
	if !ok {
		e.T.Fatalf("%s v%d is not a release secret", name, rev)
	}
	return r
}

// Status is a revision's status and description as Helm decodes them.
func (e *Cluster) Status(name string, rev int) (helmrelease.Status, string) {
	e.T.Helper()
	rel, err := e.Store.Get(Ctx(e.T), "ns", name, rev)
	if err != nil {
		e.T.Fatal(err)
	}
	return rel.Info.Status, rel.Info.Description
}

// HostileRecord is what a namespace editor can write: Helm's labels and ours (pending,
// queued, dead-lettered) on a payload that does not decode (data nil: "garbage").
func (e *Cluster) HostileRecord(name string, data map[string][]byte) {
	e.T.Helper()
	if data == nil {
		data = map[string][]byte{"release": []byte("garbage")}
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: release.SecretName(name, 1), Namespace: "ns",
		Labels: map[string]string{release.LabelOwner: release.OwnerHelm, release.LabelName: name,
			release.LabelStatus: "pending-install", release.LabelVersion: "1", release.LabelRevision: "1",
			release.LabelQueued: "true", release.LabelRequestID: "req-" + name},
		Annotations: map[string]string{release.AnnotationDeadLettered: T0.Format("2006-01-02T15:04:05Z")}},
		Type: release.SecretType, Data: data}
	if _, err := e.C.CoreV1().Secrets("ns").Create(Ctx(e.T), sec, metav1.CreateOptions{}); err != nil {
		e.T.Fatal(err)
	}
}

// SecretGets lists the resourceVersion asked for by each GET of a secret since the last
// ClearActions.
func (e *Cluster) SecretGets() []string {
	var rvs []string
	for _, a := range e.C.Actions() {
		if g, ok := a.(k8stesting.GetActionImpl); ok && g.GetResource().Resource == "secrets" {
			rvs = append(rvs, g.GetOptions.ResourceVersion)
		}
	}
	return rvs
}

// Sink records what it acknowledges; while refusing it answers every send with an error.
type Sink struct {
	mu       sync.Mutex
	got      []cloudevents.Event
	refusing bool
}

// Send records e, or refuses it.
func (s *Sink) Send(_ context.Context, e cloudevents.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refusing {
		return errors.New("sink refuses")
	}
	s.got = append(s.got, e)
	return nil
}

// Refuse makes the sink refuse (true) or take (false) what it is sent.
func (s *Sink) Refuse(r bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusing = r
}

// Events are the events taken, in order.
func (s *Sink) Events() []cloudevents.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]cloudevents.Event(nil), s.got...)
}

// Statuses lists the status of each status event taken, in order.
func (s *Sink) Statuses(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, e := range s.Events() {
		c, err := events.ParseStatus(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c.Status)
	}
	return out
}
