package notifier

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"go.uber.org/zap"
	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

var signingKey = []byte("0123456789abcdef0123456789abcdef")

// signed is the accepted event of a as submit signs it now, as stored in a reservation.
func (e *env) signed(a events.Action) []byte {
	e.t.Helper()
	ev, err := events.NewAccepted(a)
	if err != nil {
		e.t.Fatal(err)
	}
	events.Sign(&ev, signingKey, e.clock.Now())
	stored, err := ev.MarshalJSON()
	if err != nil {
		e.t.Fatal(err)
	}
	return stored
}

// sink records what it acknowledges; while refusing it answers every send with an error.
type sink struct {
	mu       sync.Mutex
	got      []cloudevents.Event
	refusing bool
}

func (s *sink) Send(_ context.Context, e cloudevents.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refusing {
		return errors.New("sink refuses")
	}
	s.got = append(s.got, e)
	return nil
}

func (s *sink) refuse(r bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refusing = r
}

func (s *sink) events() []cloudevents.Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]cloudevents.Event(nil), s.got...)
}

// types lists the status of each status event, in order.
func (s *sink) statuses(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, e := range s.events() {
		c, err := events.ParseStatus(e)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c.Status)
	}
	return out
}

type env struct {
	t     *testing.T
	c     *fakekube.Cluster
	clock *fakekube.Clock
	store *release.Store
	sink  *sink
	svc   *Service
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clock := fakekube.NewClock(t0)
	c := fakekube.New(clock)
	e := &env{t: t, c: c, clock: clock, sink: &sink{},
		store: &release.Store{Client: c, Metadata: c.Metadata(), Clock: clock}}
	e.svc = &Service{Client: c, Metadata: c.Metadata(), Store: e.store, Sender: e.sink,
		Log: zap.NewNop().Sugar(), Clock: clock}
	e.svc.Init()
	// The namespace exists: a revision's Secret deleted there is not lost work (vanished.go).
	if _, err := c.CoreV1().Namespaces().Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return e
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	return c
}

// reserve makes a reservation as submit does, with its signed-event copy.
func (e *env) reserve(name string, action release.Action, rev int) string {
	e.t.Helper()
	stored := e.signed(events.Action{Action: action, Namespace: "ns", Name: name, Revision: rev,
		SecretName: release.SecretName(name, rev), RequestID: "req-" + name})
	if _, err := e.store.Reserve(ctx(e.t), release.Reservation{Namespace: "ns", Name: name, Action: action, Revision: rev,
		Chart: &chart.Metadata{Name: "tiny", Version: "1.0.0"}, RequestID: "req-" + name, Event: stored}); err != nil {
		e.t.Fatal(err)
	}
	return string(stored)
}

// set rewrites a revision as Helm does (status, description; the queued label dropped
// when the status changes, as Helm's adoption does).
func (e *env) set(name string, rev int, status helmrelease.Status, desc string) {
	e.t.Helper()
	d := storage.NewSecrets(e.c.CoreV1().Secrets("ns"))
	rel, err := d.Get(release.SecretName(name, rev))
	if err != nil {
		e.t.Fatal(err)
	}
	rel.Info.Status, rel.Info.Description = status, desc
	delete(rel.Labels, release.LabelQueued)
	if err := d.Update(release.SecretName(name, rev), rel); err != nil {
		e.t.Fatal(err)
	}
}

// patch merge-patches the metadata of a revision's secret.
func (e *env) patch(name string, rev int, patch string) {
	e.t.Helper()
	if _, err := e.c.CoreV1().Secrets("ns").Patch(ctx(e.t), release.SecretName(name, rev), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) meta(name string, rev int) *metav1.PartialObjectMetadata {
	e.t.Helper()
	m, err := e.c.Metadata().Resource(release.SecretsResource).Namespace("ns").Get(ctx(e.t), release.SecretName(name, rev), metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return m
}

func (e *env) revision(name string, rev int) release.Revision {
	e.t.Helper()
	r, ok := release.RevisionFromMeta(e.meta(name, rev))
	if !ok {
		e.t.Fatalf("%s v%d is not a release secret", name, rev)
	}
	return r
}

func (e *env) status(name string, rev int) (helmrelease.Status, string) {
	e.t.Helper()
	rel, err := e.store.Get(ctx(e.t), "ns", name, rev)
	if err != nil {
		e.t.Fatal(err)
	}
	return rel.Info.Status, rel.Info.Description
}
