package executor

import (
	"context"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"k8s.io/client-go/kubernetes"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// What the executor needs of the world, as small interfaces: the functions wire the real
// clients, unit tests fakes.

// Store reads a revision and records its failure (release.Store).
type Store interface {
	Get(ctx context.Context, namespace, name string, revision int) (*helmrelease.Release, error)
	// GetWithApplyMethod is Get with the apply_method Helm v4 keeps in the record ("" for
	// none), which a rollback pin covers: both from one read.
	GetWithApplyMethod(ctx context.Context, namespace, name string, revision int) (*helmrelease.Release, string, error)
	MarkFailed(ctx context.Context, namespace, name string, revision int, reason string, ifFailed release.IfFailed) (bool, error)
	// MarkFailedSeeing is MarkFailed telling the status of a record it left alone.
	MarkFailedSeeing(ctx context.Context, namespace, name string, revision int, reason string, ifFailed release.IfFailed) (helmrelease.Status, bool, error)
	// LiveHistory lists the release's revisions from the API server, newest first (an
	// uninstall checks its revision is still the latest).
	LiveHistory(ctx context.Context, namespace, name string) ([]release.Revision, error)
	// An uninstall's tombstone: written before Helm runs, finished when it succeeded,
	// buried when it failed (the notifier reports and buries a finished one).
	DigTombstone(ctx context.Context, t lease.Tombstone) (lease.Tombstone, error)
	FinishTombstone(ctx context.Context, t lease.Tombstone) error
	BuryTombstone(ctx context.Context, t lease.Tombstone) error
	// SecretMeta is the metadata of the revision's Secret now (nil when it is gone): its UID
	// is the identity an accepted event is consumed for.
	SecretMeta(ctx context.Context, namespace, secretName string) (metav1.Object, error)
	// Reserve reserves a revision as submit does: a retry's or a remediation's, when the
	// action has no caller to reserve it as (remediate.go).
	Reserve(ctx context.Context, r release.Reservation) (*corev1.Secret, error)
}

// Consumed records which request ids were acted on, in state tenants cannot write
// (consumed.Store).
type Consumed interface {
	Consume(ctx context.Context, r consumed.Record) (first bool, err error)
	// Lookup reads a request's record (nil when there is none): its Outcome says it ran.
	Lookup(ctx context.Context, requestID string) (*consumed.Record, error)
	// MarkDone records the request's outcome: no later delivery resumes it.
	MarkDone(ctx context.Context, requestID, outcome string) error
	// ClaimResume counts one more resume of the request (consumed.ErrTooManyResumes past
	// the bound).
	ClaimResume(ctx context.Context, requestID string) error
	// StepsOf says how far the request's retries and remediation went.
	StepsOf(ctx context.Context, requestID string) (consumed.Steps, error)
	// ClaimStep claims a step after the request's first attempt (consumed.ErrStepTaken
	// when another executor did).
	ClaimStep(ctx context.Context, requestID string, step consumed.Step) error
}

// Helm runs the Helm actions on a reserved revision (helmexec.Factory), and gives a client
// with the caller's identity for the progress reads.
type Helm interface {
	Install(ctx context.Context, req helmexec.Request, opts ...helmexec.Option) (*helmrelease.Release, error)
	Upgrade(ctx context.Context, req helmexec.Request, opts ...helmexec.Option) (*helmrelease.Release, error)
	Uninstall(ctx context.Context, req helmexec.Request, opts ...helmexec.Option) (*helmrelease.Release, error)
	Rollback(ctx context.Context, req helmexec.Request, opts ...helmexec.Option) (*helmrelease.Release, error)
	Client(opts ...helmexec.Option) (kubernetes.Interface, error)
	// Readiness is how progress judges a workload ready: as the engine's wait does.
	Readiness() progress.ReadyFunc
}

// Charts fetches the chart a request names (chartsource.Source).
type Charts interface {
	Get(ctx context.Context, ref chartref.Ref) (*chartsource.Chart, error)
}

// Leases hands out the heartbeat lease of a revision; a nil Lease means a live holder has it.
type Leases interface {
	// Hold takes it for the action of request requestID, whose cancels alone it honours.
	Hold(ctx context.Context, namespace, name, requestID string) (Lease, error)
}

// Lease is the lease one action holds (lease.Held).
type Lease interface {
	// Keep renews until ctx ends; lost is called once if the lease is taken away.
	Keep(ctx context.Context, lost func(reason string))
	// Release gives the lease up if this action still holds it.
	Release(ctx context.Context) error
	// Sync writes an annotation (the action's progress) when it changed, and reports why
	// the lease is lost ("" while held).
	Sync(ctx context.Context, key, value string) (lost string, err error)
	// CancelledBy is who asked, on the lease, for the action to stop ("" for nobody).
	CancelledBy() string
}

// HeartbeatLeases are the Leases of a lease.Heartbeat.
func HeartbeatLeases(h *lease.Heartbeat) Leases { return heartbeatLeases{h} }

type heartbeatLeases struct{ h *lease.Heartbeat }

func (l heartbeatLeases) Hold(ctx context.Context, namespace, name, requestID string) (Lease, error) {
	held, err := l.h.HoldFor(ctx, namespace, name, requestID)
	if held == nil { // a nil *Held must not become a non-nil Lease
		return nil, err
	}
	return held, err
}
