package sweeper

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/internal/testrelease"
	"github.com/async-helm/async-helm/pkg/release"
)

var (
	t0         = testrelease.T0
	signingKey = testrelease.SigningKey
)

// env is a sweeper over a fake cluster (testrelease.Cluster: reserve, set, patch and read
// records), its re-sends in redrive.
type env struct {
	*testrelease.Cluster
	t       *testing.T
	c       *fakekube.Cluster
	clock   *fakekube.Clock
	store   *release.Store
	redrive *testrelease.Sink
	sw      *Sweeper
}

func newEnv(t *testing.T) *env {
	t.Helper()
	cl := testrelease.New(t)
	e := &env{Cluster: cl, t: t, c: cl.C, clock: cl.Clock, store: cl.Store, redrive: &testrelease.Sink{}}
	e.sw = &Sweeper{Store: e.store, Redrive: e.redrive, Log: zap.NewNop().Sugar(), Clock: e.clock,
		SigningKey: signingKey, EventMaxAge: 3 * time.Hour,
		Config: Config{Interval: time.Hour, RedriveAfter: 2 * time.Minute, Grace: time.Minute, QueueDeadline: time.Hour}}
	return e
}

// deployedWeb is an environment holding release web, revision 1 deployed.
func deployedWeb(t *testing.T) *env {
	e := newEnv(t)
	e.Reserve("web", release.ActionInstall, 1)
	e.Set("web", 1, helmrelease.StatusDeployed, "")
	return e
}

func ctx(t *testing.T) context.Context { return testrelease.Ctx(t) }
