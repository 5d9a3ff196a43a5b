package executor

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// Attack by a namespace editor on another caller's running action: it deletes the
// revision's heartbeat Lease (its to write), the executor takes the Lease as lost and
// fences its run, and the editor posts the bound event (kept in the pending Secret) to
// another executor pod, which resumes the request: Helm runs again as the caller. Again and
// again, one Lease deletion each, within EVENT_MAX_AGE. A resume is meant for an executor
// that died: a request should not be resumed without bound (here: more than once).
func TestDeletingTheLeaseDoesNotRestartTheActionAgainAndAgain(t *testing.T) {
	e := newEnv(t, 1)
	e.svc.RequireBinding = true
	e.svc.ProgressInterval = 5 * time.Millisecond
	started := make(chan struct{}, 10)
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		started <- struct{}{}
		<-ctx.Done() // a long --wait, until the executor ends it
		return nil, ctx.Err()
	}
	a := e.reserve("web", "victim-req")
	a.BoundSecretUID = e.secretUID("web")
	pod := func(i int) *Service {
		return New(Service{Store: e.svc.Store, Helm: e.svc.Helm, Charts: e.svc.Charts, Consumed: e.svc.Consumed,
			Heartbeat: HeartbeatLeases(&lease.Heartbeat{Client: e.c, Holder: "pod-" + string(rune('a'+i)), Duration: time.Minute, Clock: e.clock}),
			Log:       zap.NewNop().Sugar(), MaxActionTime: time.Minute, RequireBinding: true, ProgressInterval: 5 * time.Millisecond}, 1)
	}
	deletions := consumed.MaxResumes + 3 // more than the bound allows
	for i := 0; i < deletions; i++ {
		done := make(chan struct{})
		go func() { _, _ = pod(i).Handle(ctx(t), context.Background(), a, nil); close(done) }()
		select {
		case <-started:
		case <-done: // refused: the request is not run again
			i = deletions
			continue
		}
		if err := e.c.CoordinationV1().Leases("ns").Delete(ctx(t), release.LeaseName("web", 1), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		<-done
	}
	// A lost executor is resumed (it may have crashed), at most consumed.MaxResumes times.
	if n := e.helm.calls.Load(); n > 1+consumed.MaxResumes {
		t.Errorf("Helm ran the one accepted request %d times: each Lease deletion and re-post restarted it", n)
	}
}
