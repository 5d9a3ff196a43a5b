package sweeper

import (
	"fmt"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release"
)

// A record whose labels
// say pending but whose payload is final (a namespace editor's rewrite, no seal needed) is
// never failed: MarkFailedAt finds it final and answers "not done". The sweep took that
// "not done" for a record rewritten since its read and read, decided and wrote again
// sweepRetry.Steps times, every pass: many such records multiplied the pass's API calls
// and sleeps for every namespace. A record unchanged since the read is not tried again.
func TestFinalPayloadUnderPendingLabelsIsNotRetriedEveryPass(t *testing.T) {
	e := newEnv(t)
	e.Reserve("web", release.ActionInstall, 1)
	e.Set("web", 1, helmrelease.StatusDeployed, "done") // payload final, queued label off
	e.Patch("web", 1, fmt.Sprintf(`{"metadata":{"labels":{"status":%q}}}`, helmrelease.StatusPendingInstall.String()))
	if rev := e.Revision("web", 1); !rev.Ours || !release.IsPending(rev.Status) {
		t.Fatalf("the decoy is not listed as a pending revision of ours: %+v", rev)
	}
	e.clock.Add(2 * time.Hour)
	if n := e.secretGetsInAPass(t); n > 4 {
		t.Errorf("one pass over one record with final payload and pending labels read its Secret %d times; want at most 4", n)
	}
}

// The same record labelled as an uninstall marked in the future (status, action and
// modifiedAt labels; the payload deployed) is failed on sight (dueOf), before act: that
// path too is not tried again on a record unchanged since its last try.
func TestFinalPayloadUnderAFutureMarkIsNotRetriedEveryPass(t *testing.T) {
	e := deployedWeb(t)
	future := e.clock.Now().Add(time.Hour).Unix()
	e.Patch("web", 1, fmt.Sprintf(`{"metadata":{"labels":{"status":%q,%q:%q,%q:"%d"}}}`,
		release.StatusUninstalling, release.LabelAction, release.ActionUninstall, release.LabelModifiedAt, future))
	if rev := e.Revision("web", 1); !rev.Ours || !release.IsPending(rev.Status) {
		t.Fatalf("the decoy is not listed as a pending revision of ours: %+v", rev)
	}
	if n := e.secretGetsInAPass(t); n > 4 {
		t.Errorf("one pass over one deployed record labelled as an uninstall marked in the future read its Secret %d times; want at most 4", n)
	}
}

// secretGetsInAPass runs one sweep pass and counts the Secret GETs it made.
func (e *env) secretGetsInAPass(t *testing.T) int {
	t.Helper()
	before := len(e.SecretGets())
	if _, err := e.sw.SweepOnce(ctx(t)); err != nil {
		t.Fatal(err)
	}
	n := len(e.SecretGets()) - before
	t.Logf("secret GETs in the pass: %d", n)
	return n
}
