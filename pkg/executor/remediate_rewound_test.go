package executor

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// Attack on retries by a namespace editor: while the retry (revision 2) of a request runs,
// the editor deletes revision 1's heartbeat Lease (its to write; the chain no longer watches
// it), rewinds revision 1 in place to pending-install and delivers the request's bound event
// again. The request's action must not run twice at once: the first attempt's rerun would
// be a second Helm action on the release beside the retry, as the caller.
func TestRewoundAttemptDoesNotRunBesideItsRetry(t *testing.T) {
	e := newEnv(t, 2)
	e.svc.RequireBinding = true
	retrying, finish := make(chan struct{}), make(chan struct{})
	var v1Runs atomic.Int32
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		d := storage.NewSecrets(e.c.CoreV1().Secrets(req.Namespace))
		key := release.SecretName(req.Name, req.Revision)
		rel, err := d.Get(key)
		if err != nil {
			return nil, err
		}
		if req.Revision == 1 {
			v1Runs.Add(1)
			rel.Info.Status = helmrelease.StatusFailed
			return rel, errors.Join(d.Update(key, rel), errors.New("pre-install hook failed"))
		}
		close(retrying)
		<-finish
		rel.Info.Status = helmrelease.StatusDeployed
		return rel, d.Update(key, rel)
	}
	a := e.reserve("web", "req-1")
	a.Options.Retries = 1
	a.BoundSecretUID = e.secretUID("web")
	done := make(chan Outcome, 1)
	go func() { o, _ := e.svc.Handle(ctx(t), context.Background(), a, nil); done <- o }()
	<-retrying
	if err := e.c.CoordinationV1().Leases("ns").Delete(ctx(t), release.LeaseName("web", 1), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.rewindToPending(helmrelease.StatusPendingInstall)
	// Another executor pod takes the redelivery (the Broker picks any).
	other := New(Service{Store: e.svc.Store, Helm: e.svc.Helm, Charts: e.svc.Charts, Consumed: e.svc.Consumed,
		Heartbeat: HeartbeatLeases(&lease.Heartbeat{Client: e.c, Holder: "pod-2", Duration: time.Minute, Clock: e.clock}),
		Log:       zap.NewNop().Sugar(), MaxActionTime: time.Minute, RequireBinding: true}, 2)
	replay, _ := other.Handle(ctx(t), context.Background(), a, nil)
	runsBeside := v1Runs.Load()
	close(finish)
	<-done
	if runsBeside != 1 {
		t.Errorf("the first attempt ran again (replay answered %s) while its retry was running: %d runs of revision 1", replay, runsBeside)
	}
}
