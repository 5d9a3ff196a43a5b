package executor

import (
	"context"
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/hostile"
	"github.com/async-helm/async-helm/pkg/release"
)

// rewindToPending rewrites web v1 in place (same Secret, same UID) back to st, payload and
// labels, as a namespace editor can once the action has ended.
func (e *env) rewindToPending(st helmrelease.Status) {
	e.t.Helper()
	if err := hostile.Rewind(ctx(e.t), e.c.CoreV1().Secrets("ns"), release.SecretName("web", 1), st, nil); err != nil {
		e.t.Fatal(err)
	}
}

// Attack on retries by a namespace editor: a request with one retry ran both attempts
// (revisions 1 and 2 failed). The editor deletes revision 2, rewrites revision 1 in place
// back to pending-install and delivers the request's bound event again, so that the chain
// starts over and its retry runs a second time. The retry is claimed on the request's
// consumed record (async-helm's own), so revision 2 is never reserved or run again.
// (That attempt 1 itself runs again is TestBoundEventReplayedOnItsFinishedRecordRewoundInPlace.)
func TestRewoundFirstAttemptDoesNotRunItsRetryAgain(t *testing.T) {
	e, vh := remEnv(t, 10)
	e.svc.RequireBinding = true
	a := e.reserve("web", "req-1")
	a.Options.Retries = 1
	a.BoundSecretUID = e.secretUID("web")
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeFailed {
		t.Fatalf("Handle = %s, %v", got, err)
	}
	if err := e.c.CoreV1().Secrets("ns").Delete(ctx(t), release.SecretName("web", 2), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.rewindToPending(helmrelease.StatusPendingInstall)
	_, _ = e.svc.Handle(ctx(t), context.Background(), a, nil)
	if n := strings.Count(strings.Join(vh.verbs, ","), "install v2"); n != 1 {
		t.Errorf("the retry (revision 2) ran %d times: %v", n, vh.verbs)
	}
	if _, err := e.store.Get(ctx(t), "ns", "web", 2); err == nil {
		t.Error("revision 2 was reserved again")
	}
}
