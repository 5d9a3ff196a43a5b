package executor

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/fairqueue"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
)

// slotReads is a Store that notes every read of a release's records (they decode what the
// tenant can write) made while the release's namespace held no CPU slot.
type slotReads struct {
	Store
	cpu     func() *fairqueue.Queue
	mu      sync.Mutex
	outside []string
}

func (r *slotReads) Get(ctx context.Context, namespace, name string, revision int) (*helmrelease.Release, error) {
	r.check(namespace, fmt.Sprintf("Get %s v%d", name, revision))
	return r.Store.Get(ctx, namespace, name, revision)
}

func (r *slotReads) GetWithApplyMethod(ctx context.Context, namespace, name string, revision int) (*helmrelease.Release, string, error) {
	r.check(namespace, fmt.Sprintf("GetWithApplyMethod %s v%d", name, revision))
	return r.Store.GetWithApplyMethod(ctx, namespace, name, revision)
}

func (r *slotReads) LiveHistory(ctx context.Context, namespace, name string) ([]release.Revision, error) {
	r.check(namespace, "LiveHistory "+name)
	return r.Store.LiveHistory(ctx, namespace, name)
}

func (r *slotReads) check(namespace, what string) {
	held := 0
	for _, st := range r.cpu().Stats() {
		if st.Namespace == namespace {
			held += st.Held
		}
	}
	if held == 0 {
		r.mu.Lock()
		defer r.mu.Unlock()
		r.outside = append(r.outside, what)
	}
}

// A retry, a rollback remediation and an uninstall remediation read the tenant's records
// (the failed attempt's, the pinned target, each new revision) and an uninstall
// remediation runs Helm: each in a CPU slot of the request's namespace, as admission's
// reads and Helm's other runs are, never holding only the action slot. Before, the
// remediation's reads and its uninstall ran outside the CPU pool and its tenant's share.
func TestRemediationDecodesInACPUSlot(t *testing.T) {
	for _, tc := range []struct {
		name     string
		failures int
		action   func(e *env) events.Action
		want     Outcome
		verbs    string
	}{
		{"retry", 1, func(e *env) events.Action {
			a := e.reserve("web", "req-1")
			a.Options.Retries = 1
			return a
		}, OutcomeDeployed, "install v1,install v2"},
		{"rollback", 1, func(e *env) events.Action { return e.remediatedUpgrade() }, OutcomeFailed, "upgrade v2,rollback v3"},
		{"uninstall", 10, func(e *env) events.Action {
			a := e.reserve("web", "req-1")
			a.Options.Retries, a.Options.Remediation = 1, "uninstall"
			return a
		}, OutcomeFailed, "install v1,install v2,uninstall v2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, vh := remEnv(t, tc.failures)
			a := tc.action(e)
			reads := &slotReads{Store: e.svc.Store, cpu: func() *fairqueue.Queue { return e.svc.cpu }}
			e.svc.Store = reads
			failOutside := e.helm.run
			e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
				reads.check(req.Namespace, fmt.Sprintf("Helm v%d", req.Revision))
				return failOutside(ctx, req)
			}
			if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != tc.want {
				t.Fatalf("Handle = %s, %v; want %s", got, err, tc.want)
			}
			if got := strings.Join(vh.verbs, ","); got != tc.verbs {
				t.Fatalf("Helm ran %s, want %s", got, tc.verbs)
			}
			if len(reads.outside) > 0 {
				t.Errorf("outside a CPU slot of the namespace: %s", strings.Join(reads.outside, "; "))
			}
			if _, cpu := e.svc.Shares(); len(cpu) != 0 {
				t.Errorf("CPU slots still held or waited for: %+v", cpu)
			}
			e.noLeases()
		})
	}
}
