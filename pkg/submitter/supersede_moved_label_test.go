package submitter

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// A supersede acts on the release's own newest record, its version read from its Secret's
// name (f1383fd), but waited for that version's end by the version labels of the history:
// with the version label of the running revision 2 moved to 9, no record was labelled 2,
// the wait took it for ended at its first read, and revision 3 was reserved (and sent)
// while 2's executor still ran. It now waits for the record it cancelled, by its Secret's
// name: a revision that never ends answers 503 and nothing is reserved.
func TestSupersedeWaitsForTheRecordItCancelledWhateverItsVersionLabel(t *testing.T) {
	e := supersedeEnv(t) // web: revision 1 deployed, 2 pending-upgrade (req-1)
	exec := &lease.Heartbeat{Client: e.c, Holder: "executor", Duration: time.Minute, Clock: e.svc.Clock}
	if h, err := exec.Hold(ctx(t), "ns", release.LeaseName("web", 2)); h == nil || err != nil {
		t.Fatal(h, err)
	}
	patch := `{"metadata":{"labels":{"` + release.LabelVersion + `":"9"}}}`
	if _, err := e.c.CoreV1().Secrets("ns").Patch(ctx(t), release.SecretName("web", 2), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	fixed := e.svc.Clock // submit's own clock moves 10 s per reading; the Leases keep theirs
	e.svc.Heartbeat = &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: fixed}
	e.svc.Clock = &testingclock.IntervalClock{Time: fixed.Now(), Duration: 10 * time.Second}
	if acc, err := e.svc.Submit(ctx(t), release.ActionUpgrade, superseding("web"), nil); !errors.Is(err, ErrNotAccepted) {
		reserved := 0
		if acc != nil {
			reserved = acc.Revision
		}
		t.Errorf("supersede of a running revision whose version label was moved: revision %d reserved, %v; want 503 once the wait is over", reserved, err)
	}
	if _, err := e.store.Get(ctx(t), "ns", "web", 3); !errors.Is(err, release.ErrNotFound) {
		t.Errorf("revision 3 was reserved while revision 2 still ran: %v", err)
	}
}
