package submitter

import (
	"errors"
	"math"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// A pending record named sh.helm.release.v1.web.v9223372036854775807 (a valid int64, made
// by a namespace editor) made a supersede reserve its Version+1, wrapped to a negative
// revision, after it had cancelled that record. The next revision is refused first (409),
// and nothing is cancelled or reserved.
func TestSupersedeAfterTheLargestRevisionIsRefused(t *testing.T) {
	e := newEnv(t)
	e.svc.Heartbeat = &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: e.svc.Clock}
	e.deploy("web", 1, helmrelease.StatusDeployed)
	e.deploy("web", math.MaxInt64, helmrelease.StatusPendingUpgrade)
	n := len(e.secrets())
	req := install("web")
	req.Supersede = true
	acc, err := e.svc.Submit(ctx(t), release.ActionUpgrade, req, nil)
	if acc != nil || !errors.Is(err, release.ErrRevisionRange) {
		t.Fatalf("upgrade with supersede = %+v, %v; want ErrRevisionRange", acc, err)
	}
	if st, _ := e.status("web", math.MaxInt64); st != helmrelease.StatusPendingUpgrade {
		t.Errorf("the record it would supersede is %s; want it left pending-upgrade", st)
	}
	if len(e.secrets()) != n || len(e.sender.sent) != 0 {
		t.Errorf("%d records (was %d), %d events sent; want nothing reserved or sent", len(e.secrets()), n, len(e.sender.sent))
	}
}
