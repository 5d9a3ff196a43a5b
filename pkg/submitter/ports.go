package submitter

import (
	"context"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"

	"github.com/async-helm/async-helm/pkg/auth"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/ledger"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// Store reserves revisions and takes them back (release.Store).
type Store interface {
	// CachedNextRevision checks that the action may start now and returns the revision it
	// would reserve, and whether that is a guess of a cache that may lag.
	CachedNextRevision(ctx context.Context, namespace, name string, action release.Action) (rev int, guessed bool, err error)
	// LiveNextRevision is CachedNextRevision read from the API server, never guessed.
	LiveNextRevision(ctx context.Context, namespace, name string, action release.Action) (int, error)
	Reserve(ctx context.Context, r release.Reservation) (*corev1.Secret, error)
	Undo(ctx context.Context, sec *corev1.Secret) error
	Get(ctx context.Context, namespace, name string, revision int) (*helmrelease.Release, error)
	// GetWithApplyMethod is Get with the record's apply method, from the same read.
	GetWithApplyMethod(ctx context.Context, namespace, name string, revision int) (*helmrelease.Release, string, error)
	// ApplyMethod is the apply_method Helm v4 keeps in a revision's record ("" for none).
	ApplyMethod(ctx context.Context, namespace, name string, revision int) (string, error)
	// Current is the revision an upgrade starts from: the latest below revision below.
	Current(ctx context.Context, namespace, name string, below int) (*helmrelease.Release, error)
	// History is the release's revisions, newest first (from the cache when there is one).
	History(ctx context.Context, namespace, name string) ([]release.Revision, error)
	// LiveHistory is the release's revisions read from the API server (a cancel's view).
	LiveHistory(ctx context.Context, namespace, name string) ([]release.Revision, error)
	MarkFailed(ctx context.Context, namespace, name string, revision int, reason string, ifFailed release.IfFailed) (bool, error)
	// MarkUninstalling records an accepted uninstall on a revision; Unmark takes it back.
	MarkUninstalling(ctx context.Context, m release.UninstallMark) (*release.Marked, error)
	Unmark(ctx context.Context, m *release.Marked) error
	// KeptRequest is what the Secret of that name holds that names a request (stored event,
	// request-id label and seal), read by name; nil when it is gone.
	KeptRequest(ctx context.Context, namespace, secretName string) (*release.KeptRequest, error)
}

// Leases asks a revision's executor, through its Lease, to stop (lease.Heartbeat).
type Leases interface {
	RequestCancel(ctx context.Context, namespace, key, requestID, by string) (running bool, err error)
	ReleaseCancel(ctx context.Context, namespace, key, by string) error
}

// Charts fetches the chart a request names (chartsource.Source).
type Charts interface {
	Get(ctx context.Context, ref chartref.Ref) (*chartsource.Chart, error)
}

// RepoSecrets names the Secrets whose contents fetching a chart would send (repos.Set).
type RepoSecrets interface {
	CredentialSecrets(namespace, indexEntry, chartURL string) ([]string, error)
}

// Bindings binds a request id to its reservation Secret's UID where tenants cannot write
// (consumed.Store): the executor runs a request only on the Secret it is bound to.
type Bindings interface {
	Consume(ctx context.Context, r consumed.Record) (first bool, err error)
	// Lookup and MarkDone let a cancel end a request a lost executor had bound.
	Lookup(ctx context.Context, requestID string) (*consumed.Record, error)
	MarkDone(ctx context.Context, requestID, outcome string) error
}

// Ledger is admission's account of accepted, not yet consumed requests (ledger.Ledger).
type Ledger interface {
	// Admit decides a request of caller in namespace; admitted, it holds its place until
	// release is called (ledger.Book.Admit).
	Admit(namespace, caller string, l ledger.Limits) (release func(), r *ledger.Refusal)
	// Add records an accepted request before its 201.
	Add(ctx context.Context, e ledger.Entry) error
	// Pending is the request accepted last for a revision's Secret and not consumed yet.
	Pending(namespace, secretName string) (requestID string, ok bool)
}

// Authorizer checks what a user may do (auth.Authorizer).
type Authorizer interface {
	Check(ctx context.Context, u *auth.User, needs ...auth.Need) error
}

// Steps on the way to a 201 whose time ObserveSteps reports (docs/benchmarks.md).
const (
	StepAuthorize = "authorize" // the access review (cached)
	StepChart     = "chart"     // fetching the chart (cached by digest)
	StepReserve   = "reserve"   // the reservation's create: the one API write
	StepSend      = "send"      // the accepted event to the sink
)

// StepObserver is told how long one step took (a metrics histogram).
type StepObserver func(step string, d time.Duration)

// ObserveSteps makes s report the time of each step by wrapping its ports.
func ObserveSteps(s *Service, observe StepObserver) {
	s.Store = timedStore{Store: s.Store, observe: observe}
	s.Sender = timedSender{EventSender: s.Sender, observe: observe}
	s.Charts = timedCharts{Charts: s.Charts, observe: observe}
	if s.Authorizer != nil {
		s.Authorizer = timedAuthorizer{Authorizer: s.Authorizer, observe: observe}
	}
}

func since(observe StepObserver, step string, start time.Time) { observe(step, time.Since(start)) }

type timedStore struct {
	Store
	observe StepObserver
}

func (t timedStore) Reserve(ctx context.Context, r release.Reservation) (*corev1.Secret, error) {
	defer since(t.observe, StepReserve, time.Now())
	return t.Store.Reserve(ctx, r)
}

type timedSender struct {
	EventSender
	observe StepObserver
}

func (t timedSender) Send(ctx context.Context, e cloudevents.Event) error {
	defer since(t.observe, StepSend, time.Now())
	return t.EventSender.Send(ctx, e)
}

type timedCharts struct {
	Charts
	observe StepObserver
}

func (t timedCharts) Get(ctx context.Context, ref chartref.Ref) (*chartsource.Chart, error) {
	defer since(t.observe, StepChart, time.Now())
	return t.Charts.Get(ctx, ref)
}

type timedAuthorizer struct {
	Authorizer
	observe StepObserver
}

func (t timedAuthorizer) Check(ctx context.Context, u *auth.User, needs ...auth.Need) error {
	defer since(t.observe, StepAuthorize, time.Now())
	return t.Authorizer.Check(ctx, u, needs...)
}
