package notifier

import (
	"context"
	"testing"

	"go.uber.org/zap"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/internal/testrelease"
	"github.com/async-helm/async-helm/pkg/release"
)

var (
	t0         = testrelease.T0
	signingKey = testrelease.SigningKey
)

// env is a notifier over a fake cluster (testrelease.Cluster: reserve, set, patch and
// read records), its status events in sink.
type env struct {
	*testrelease.Cluster
	t     *testing.T
	c     *fakekube.Cluster
	clock *fakekube.Clock
	store *release.Store
	sink  *testrelease.Sink
	svc   *Service
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cl := testrelease.New(t)
	e := &env{Cluster: cl, t: t, c: cl.C, clock: cl.Clock, store: cl.Store, sink: &testrelease.Sink{}}
	e.svc = &Service{Client: e.c, Metadata: e.c.Metadata(), Store: e.store, Sender: e.sink,
		Log: zap.NewNop().Sugar(), Clock: e.clock}
	e.svc.Init()
	// The namespace exists: a revision's Secret deleted there is not lost work (vanished.go).
	if _, err := e.c.CoreV1().Namespaces().Create(ctx(t), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return e
}

func ctx(t *testing.T) context.Context { return testrelease.Ctx(t) }
