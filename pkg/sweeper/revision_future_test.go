package sweeper

import (
	"fmt"
	"strings"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release"
)

// An uninstall's clock starts at its mark, which Helm's modifiedAt label records, and
// labels are the tenant's to write. A mark dated a century ahead put the queue deadline and
// the grace off forever: the revision stayed pending and every pass read its Lease again
// (thousands of such records made the pass expensive for good). A mark in the future past
// any clock skew is failed like any revision past its deadline.
func TestSweeperFailsAMarkDatedInTheFuture(t *testing.T) {
	e := deployedWeb(t)
	if _, err := e.store.MarkUninstalling(ctx(t), release.UninstallMark{Namespace: "ns", Name: "web", Revision: 1, RequestID: "req-u"}); err != nil {
		t.Fatal(err)
	}
	future := t0.Add(100 * 365 * 24 * time.Hour).Unix()
	e.Patch("web", 1, fmt.Sprintf(`{"metadata":{"labels":{%q:"%d",%q:null}}}`, release.LabelModifiedAt, future, release.LabelQueued))
	e.clock.Add(3 * time.Hour) // past Grace and QueueDeadline
	res, err := e.sw.SweepOnce(ctx(t))
	if err != nil || res.Failed != 1 {
		t.Errorf("sweep of an uninstall marked in the future: %+v, %v", res, err)
	}
	if st, desc := e.Status("web", 1); st != helmrelease.StatusFailed || !strings.Contains(desc, "future") {
		t.Errorf("revision %s %q", st, desc)
	}
}
