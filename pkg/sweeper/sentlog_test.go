package sweeper

import (
	"testing"
	"time"

	"github.com/async-helm/async-helm/pkg/release"
)

// The re-send backoff of a queued revision (REDRIVE_AFTER doubled per re-send) is the
// leader's own: the tenant's editor writing dead-lettered and sent=0 back on its Secret
// after each claim does not make the sweeper re-send it every pass.
func TestTheReSendBackoffIsTheLeadersNotTheTenants(t *testing.T) {
	resends := func(hostile bool) int {
		e := newEnv(t)
		e.Reserve("web", release.ActionInstall, 1)
		for range 54 * 6 { // 54 minutes of 10 s passes: how long a delivery may wait in an executor
			e.clock.Add(10 * time.Second)
			if hostile {
				e.Patch("web", 1, `{"metadata":{"annotations":{"`+release.AnnotationDeadLettered+`":"x","`+release.AnnotationSent+`":"0"}}}`)
			}
			if _, err := e.sw.SweepOnce(ctx(t)); err != nil {
				t.Fatal(err)
			}
		}
		return len(e.redrive.Events())
	}
	quiet, hostile := resends(false), resends(true)
	t.Logf("one queued revision over 54 min of 10 s passes: re-sent %d times untouched, %d times with its editor's marks", quiet, hostile)
	if hostile > 2*quiet {
		t.Errorf("the tenant's own annotations (dead-lettered, sent) had its queued revision re-sent %d times in 54 min (untouched: %d): the backoff is the tenant's to reset",
			hostile, quiet)
	}
}
