package sweeper

import (
	"testing"
	"time"

	"github.com/async-helm/async-helm/pkg/release"
)

// Attack (hostile-tenant review): a queued reservation's clock was its Secret's
// creationTimestamp. The API server sets it, but a namespace editor who deletes the Secret
// and makes it again (same name, labels, seal and payload, sent-at dated a century ahead so
// no re-send is ever due) gets a new one: done every 50 minutes, its sealed queued record
// held its MAX_QUEUED slot past QUEUE_DEADLINE for ever. Its clock is now never later than
// the sweeper's first sight of the seal's key (namespace, Secret name, request id), which
// a new Secret does not change.
func TestRemadeReservationDoesNotOutliveTheDeadline(t *testing.T) {
	e := newEnv(t)
	e.store.SealKey = signingKey
	e.Reserve("web", release.ActionInstall, 1)
	failedAt := failedUnderRewrites(t, e, func() { e.remake("web") }) // the Secret made again
	if failedAt < 0 {
		t.Fatalf("the reservation the tenant makes again every 50 minutes is still pending and queued after 3 h (QUEUE_DEADLINE %s): it holds its slot for ever",
			e.sw.Config.QueueDeadline)
	}
	if limit := e.sw.Config.QueueDeadline + 10*time.Minute; failedAt > limit {
		t.Errorf("failed %s after the reservation; want within %s", failedAt, limit)
	}
}
