// Package submitter is submit's use case: validate a request, reserve the release
// revision, emit the accepted event, or undo the reservation when nobody will act on it.
package submitter

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/ledger"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/signing"
	"github.com/async-helm/async-helm/pkg/valuesfrom"
)

// Sentinel errors of submit; the HTTP edge maps them (and those of release and
// chartsource) to status codes.
var (
	ErrInvalid           = errors.New("invalid request")
	ErrNamespaceNotFound = errors.New("namespace not found")
	ErrValues            = errors.New("values do not match the chart's schema")
	ErrNotAccepted       = errors.New("the request could not be handed to the executor")
	ErrBusy              = errors.New("too many accepted installs and upgrades are waiting for an executor")
)

// BusyError is a refusal by the admission bound; RetryAfter is a hint for the client.
type BusyError struct {
	// Queued is the count that reached Limit, of Counted (ledger.CountedQueued or
	// ledger.CountedRetained).
	Queued, Limit int
	Counted       string
	// Scope names the bound (ledger.Refusal.Scope).
	Scope      string
	RetryAfter time.Duration
}

func (e *BusyError) Error() string {
	counted := e.Counted
	if counted == "" {
		counted = ledger.CountedQueued
	}
	return fmt.Sprintf("%s: %d %s %s (limit %d); nothing was reserved, retry after %s",
		ErrBusy, e.Queued, counted, e.Scope, e.Limit, e.RetryAfter)
}

// Is makes errors.Is(err, ErrBusy) true.
func (e *BusyError) Is(target error) bool { return target == ErrBusy }

// EventSender delivers one event and reports whether the sink acknowledged it.
type EventSender interface {
	Send(ctx context.Context, e cloudevents.Event) error
}

// Service accepts install and upgrade requests.
type Service struct {
	Store      Store
	Charts     Charts
	Sender     EventSender
	Namespaces corelisters.NamespaceLister
	// Authorizer, when set, checks the caller may write the release secrets before any write.
	Authorizer Authorizer
	// SigningKey, when set, signs every accepted event (the executor rejects unsigned ones).
	SigningKey signing.Key
	NewID      func() string
	// Ledger counts the requests accepted and not consumed yet, per tenant, where tenants
	// cannot write (nil: no admission bound); past MaxQueued, MaxQueuedPerNamespace or
	// MaxRetained (ledger.Limits; 0: none) a request is refused (429) before any write.
	Ledger                           Ledger
	MaxQueued, MaxQueuedPerNamespace int
	MaxRetained                      int
	Clock                            clock.PassiveClock // nil: the wall clock
	// Heartbeat takes the Lease of a revision nobody runs, so a cancel fails it safely.
	Heartbeat Leases
	// LeaseAlive says whether an executor holds a revision's Lease now (lease.Alive); nil:
	// a cancel of an uninstall or rollback is refused as if it ran.
	LeaseAlive func(ctx context.Context, namespace, key string) (bool, error)
	// Schemas keeps compiled values schemas by chart digest (nil: compiled per request).
	Schemas *Schemas
	// RepoSecrets names the Secrets a chart's repository sends, each reviewed for the caller.
	RepoSecrets RepoSecrets
	// Supersede bounds the wait of a request with supersede for the revision it cancels.
	Supersede SupersedeOptions
	// Bindings, when set, binds each accepted request that will not run from its delivery
	// to its reservation Secret's UID (docs/design.md, "Consumed requests").
	Bindings Bindings
	// ValuesObjects reads the objects of values_from with submit's rights, after the
	// caller's access review (valuesfrom.KubeReader); nil: values_from is refused.
	ValuesObjects valuesfrom.Reader
	// Render renders a diff's chart under the template route's bounds (nil: no diffs).
	Render DiffRenderer
}

// ErrNotPending is a cancel of a release whose latest revision is final.
var ErrNotPending = errors.New("nothing to cancel")

// Cancel stops the pending revision of a release, authorized as an upgrade would be. A
// revision being run is cancelled through its Lease (its executor stops within seconds and
// records "cancelled by <user>"); one nobody runs is failed at once.
func (s *Service) Cancel(ctx context.Context, namespace, name string, user *auth.User) (*api.Cancelled, error) {
	by := "anonymous"
	if user != nil {
		by = user.Name
	}
	if _, err := s.authorize(ctx, user, namespace, "create", "update"); err != nil {
		return nil, err
	}
	revs, err := s.Store.LiveHistory(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	latest, ok := latestRecord(revs, name)
	if !ok {
		return nil, fmt.Errorf("%w: %s/%s", release.ErrNotFound, namespace, name)
	}
	out := &api.Cancelled{Name: name, Namespace: namespace, Revision: latest.Version, Status: "cancelling"}
	if !release.IsPending(latest.Status) {
		return nil, fmt.Errorf("%w: revision %d of %s/%s is %s", ErrNotPending, latest.Version, namespace, name, latest.Status)
	}
	if err := s.refuseRunning(ctx, latest); err != nil {
		return nil, err
	}
	running, err := s.Heartbeat.RequestCancel(ctx, namespace, latest.SecretName, latest.RequestID, by)
	if err != nil || running {
		return out, err
	}
	// Nobody runs it, and the Lease now keeps anyone from starting it.
	undo := context.WithoutCancel(ctx)
	defer func() { _ = s.Heartbeat.ReleaseCancel(undo, namespace, latest.SecretName, by) }()
	if err := s.bindQueued(ctx, latest); err != nil {
		return nil, err
	}
	reason := fmt.Sprintf("Release %q failed: cancelled by %s before an executor ran it", name, by)
	failed, err := s.Store.MarkFailed(ctx, namespace, name, latest.Version, reason, release.KeepFailed)
	if err != nil {
		return nil, err
	}
	if !failed {
		// Gone, or its record is not pending whatever its status label says: the request
		// is bound above and will not run, but nothing was failed here.
		return nil, fmt.Errorf("%w: revision %d of %s/%s was not failed: its record is not pending", ErrNotPending,
			latest.Version, namespace, name)
	}
	out.Status = "failed"
	return out, nil
}

// latestRecord is the newest of revs that is a record of release name, its version read
// from its Secret's name (the guarded decode holds the payload to it), never from the
// tenant's labels: another release's Secret labelled with this name is none of its records.
func latestRecord(revs []release.Revision, name string) (release.Revision, bool) {
	var latest release.Revision
	found := false
	for _, r := range revs {
		owner, v, ok := release.ParseSecretName(r.SecretName)
		if !ok || owner != name || (found && v <= latest.Version) {
			continue
		}
		r.Version = v
		latest, found = r, true
	}
	return latest, found
}

// ErrNotCancellable is a running action that cannot be stopped half-way (409).
var ErrNotCancellable = errors.New("cannot be cancelled")

// refuseRunning refuses the cancel of a running uninstall or rollback before any write: no
// point of Helm's delete or apply leaves a release Helm can handle, so their executor never
// stops them. A queued one (no live Lease) is failed at once.
func (s *Service) refuseRunning(ctx context.Context, rev release.Revision) error {
	what := ""
	switch rev.Status {
	case release.StatusUninstalling:
		what = "uninstall"
	case "pending-rollback":
		what = "rollback"
	default:
		return nil
	}
	alive := true
	var err error
	if s.LeaseAlive != nil {
		alive, err = s.LeaseAlive(ctx, rev.Namespace, rev.SecretName)
	}
	if err != nil {
		return fmt.Errorf("is the %s of %s/%s running: %w", what, rev.Namespace, rev.Name, err)
	}
	if alive {
		return fmt.Errorf("a running %s %w (revision %d of %s/%s); it ends on its own", what, ErrNotCancellable,
			rev.Version, rev.Namespace, rev.Name)
	}
	return nil
}

// Accepted is what a client learns at once: the reserved release secret.
type Accepted struct {
	Secret    *corev1.Secret
	Revision  int
	RequestID string
}

// Submit validates, reserves and hands the work to the executor (a nil user: authentication
// is off, the functions act as themselves).
func (s *Service) Submit(ctx context.Context, action release.Action, req api.ReleaseRequest, user *auth.User) (*Accepted, error) {
	if err := req.Validate(action == release.ActionInstall); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return s.accept(ctx, user, req.Namespace, func(caller events.Caller, from readFrom) (*Accepted, error) {
		return s.reserveAndSend(ctx, action, req, user, caller, from)
	})
}

// accept authorizes, checks the namespace of and admits a request that reserves a revision,
// then runs reserve (again, live, when the cache's guess was taken). Helm as the user
// creates the release secrets and updates them (adoption, supersede).
func (s *Service) accept(ctx context.Context, user *auth.User, namespace string, reserve func(events.Caller, readFrom) (*Accepted, error)) (*Accepted, error) {
	caller, err := s.authorize(ctx, user, namespace, "create", "update")
	if err != nil {
		return nil, err
	}
	if err := s.namespaceExists(namespace); err != nil {
		return nil, err
	}
	admitted, err := s.admit(namespace, user)
	if err != nil {
		return nil, err
	}
	defer admitted()
	return s.withLiveRetry(func(from readFrom) (*Accepted, error) { return reserve(caller, from) })
}

// reserveAndSend is Submit once admitted: the revision, the chart, the signed event, the
// reservation and the hand-over to the executor.
func (s *Service) reserveAndSend(ctx context.Context, action release.Action, req api.ReleaseRequest, user *auth.User, caller events.Caller, from readFrom) (*Accepted, error) {
	// Cheap history check first, so a doomed request never downloads a chart. With
	// supersede, old is the pending revision this request will take the place of.
	rev, old, guessed, err := s.nextRevision(ctx, req.Namespace, req.Name, action, req.Supersede, from)
	if err != nil {
		return nil, err
	}
	var base *helmrelease.Release // the revision an upgrade starts from, as Helm picks it
	if action == release.ActionUpgrade {
		if base, err = s.Store.Current(ctx, req.Namespace, req.Name, rev); err != nil {
			return nil, err
		}
	}
	vals, err := s.resolveValues(ctx, action, req, base, user)
	if err != nil {
		return nil, err
	}
	ref := chartRef(req, base)
	ch, digest, err := s.chart(withCaller(ctx, caller), req, ref, base, user)
	if err != nil {
		return nil, err
	}
	if err := s.Schemas.validateValues(ctx, ch, digest, vals.checked); err != nil {
		return nil, err
	}
	pin, err := s.rollbackPin(ctx, action, req, base)
	if err != nil {
		return nil, err
	}
	valuesPin, err := reusedValuesPin(action, req, vals, base)
	if err != nil {
		return nil, err
	}
	id := s.newID()
	// The signed event is built first and stored in the reservation: the reservation is the
	// durable record of the work, the event only its wake-up call (docs/design.md).
	act := acceptedAction(action, req, rev, ref, vals, digest)
	act.Caller, act.RequestID, act.RollbackPin, act.ValuesPin = caller, id, pin, valuesPin
	ev, stored, err := s.signed(act)
	if err != nil {
		return nil, err
	}
	if err := s.supersede(ctx, old, user, rev, id); err != nil {
		return nil, err
	}
	recorded := s.recordAhead(ctx, act)
	sec, err := s.Store.Reserve(ctx, release.Reservation{
		Namespace: req.Namespace, Name: req.Name, Action: action, Revision: rev,
		Chart: ch.Metadata, Values: req.Values, RequestID: id, Event: stored, Base: base,
	})
	if err != nil {
		return nil, s.unreserved(ctx, act, recorded, reserveErr(err, guessed))
	}
	if err := s.handOver(ctx, act, ev, sec.UID, recorded, func(ctx context.Context) error { return s.Store.Undo(ctx, sec) }); err != nil {
		return nil, err
	}
	return &Accepted{Secret: forClient(sec), Revision: rev, RequestID: id}, nil
}

// forClient is sec without its data (the release payload is Helm's business, not the
// client's), with its kind.
func forClient(sec *corev1.Secret) *corev1.Secret {
	sec.Data = nil
	sec.APIVersion, sec.Kind = "v1", "Secret"
	return sec
}

// acceptedAction is the accepted event's action of a validated install or upgrade request
// for revision rev, without its caller, request id and pins.
func acceptedAction(action release.Action, req api.ReleaseRequest, rev int, ref chartref.Ref, vals requestValues, digest string) events.Action {
	timeout, _ := req.ParsedTimeout() // validated by Submit
	return events.Action{
		Action: action, Namespace: req.Namespace, Name: req.Name, Revision: rev,
		SecretName: release.SecretName(req.Name, rev), Chart: ref, Values: req.Values, ValuesFrom: vals.refs,
		ReuseChart: req.ChartURL == "" && req.IndexEntry == "", ChartDigest: digest,
		Options: events.Options{Timeout: timeout, Wait: req.Wait, WaitForJobs: req.WaitForJobs,
			Atomic: req.Atomic, Description: req.Description, Retries: req.Retries, Remediation: req.Remediation,
			ServerSide: string(req.ServerSide), ForceConflicts: req.ForceConflicts, ReuseValues: vals.reuse},
	}
}

// namespaceExists is ErrNamespaceNotFound for a namespace that does not exist.
func (s *Service) namespaceExists(namespace string) error {
	if _, err := s.Namespaces.Get(namespace); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: %s", ErrNamespaceNotFound, namespace)
		}
		return fmt.Errorf("look up namespace %s: %w", namespace, err)
	}
	return nil
}

// rollbackPin pins the record an upgrade that may roll back (atomic, remediation rollback)
// may restore: its base when deployed or superseded, as Helm picks, else Revision 0 (no
// rollback may run). Nil for requests that never roll back.
func (s *Service) rollbackPin(ctx context.Context, action release.Action, req api.ReleaseRequest, base *helmrelease.Release) (*release.Pin, error) {
	if action != release.ActionUpgrade || (!req.Atomic && req.Remediation != api.RemediationRollback) {
		return nil, nil
	}
	if base == nil || base.Info == nil ||
		(base.Info.Status != helmrelease.StatusDeployed && base.Info.Status != helmrelease.StatusSuperseded) {
		return &release.Pin{}, nil
	}
	// The pin holds Helm v4's apply method too, beside Helm v3's fields.
	method, err := s.Store.ApplyMethod(ctx, req.Namespace, base.Name, base.Version)
	if err != nil {
		return nil, err
	}
	return release.PinOf(base, method)
}

// reusedValuesPin pins the values an upgrade may reuse (none given, reuse_values, or the
// values_from its base recorded): those of base, the record the executor takes them from.
// Nil for requests that reuse none.
func reusedValuesPin(action release.Action, req api.ReleaseRequest, vals requestValues, base *helmrelease.Release) (*release.Pin, error) {
	if action != release.ActionUpgrade || (len(req.Values) > 0 && !vals.reuse) {
		return nil, nil
	}
	return release.ValuesPinOf(base)
}

// chart is the requested chart (shared, read-only), or for an upgrade that names none the
// deployed revision's (the executor's rule too), with the digest the executor must find.
func (s *Service) chart(ctx context.Context, req api.ReleaseRequest, ref chartref.Ref, base *helmrelease.Release, user *auth.User) (*chart.Chart, string, error) {
	if req.ChartURL != "" || req.IndexEntry != "" {
		if err := s.mayUseCredentials(ctx, req, ref, user); err != nil {
			return nil, "", err
		}
		c, err := s.Charts.Get(ctx, ref)
		if err != nil {
			return nil, "", err
		}
		return c.Loaded, c.Digest, nil
	}
	if base == nil || base.Info.Status != helmrelease.StatusDeployed {
		return nil, "", fmt.Errorf("%w: %s/%s has no deployed revision whose chart an upgrade without a chart could reuse", chartsource.ErrNotFound, req.Namespace, req.Name)
	}
	digest, err := release.ChartDigest(base.Chart)
	return base.Chart, digest, err
}

// mayUseCredentials checks, before any fetch, that the caller may get every Secret whose
// contents fetching the chart sends: one who may create a repository but not read Secret X
// must not have X sent to a server of their choosing.
func (s *Service) mayUseCredentials(ctx context.Context, req api.ReleaseRequest, ref chartref.Ref, user *auth.User) error {
	// A chart outside the repositories goes without their credentials (its Secret, if
	// any, is read for the caller by the chart source).
	if user == nil || s.Authorizer == nil || s.RepoSecrets == nil || ref.NoRepo || ref.AuthSecret != "" {
		return nil
	}
	names, err := s.RepoSecrets.CredentialSecrets(req.Namespace, req.IndexEntry, req.ChartURL)
	if err != nil {
		return err
	}
	needs := make([]auth.Need, 0, len(names))
	for _, n := range names {
		needs = append(needs, auth.Need{Verb: "get", Resource: "secrets", Namespace: req.Namespace, Name: n})
	}
	if err := s.Authorizer.Check(ctx, user, needs...); err != nil {
		return fmt.Errorf("the chart's repository sends credentials the caller may not read: %w", err)
	}
	return nil
}

// admit applies the ledger's admission bound (docs/design.md, "Tenants and shares"); the
// request holds its place until release is called: once its entry is added, or it failed.
func (s *Service) admit(namespace string, user *auth.User) (release func(), err error) {
	if s.Ledger == nil {
		return func() {}, nil
	}
	release, r := s.Ledger.Admit(namespace, ledger.CallerKey(userName(user)),
		ledger.Limits{Max: s.MaxQueued, PerNamespace: s.MaxQueuedPerNamespace, MaxRetained: s.MaxRetained})
	if r == nil {
		return release, nil
	}
	// Queued: about what an executor slot needs for a small chart. Retained: records
	// leave the count as they age, over hours; a retry every minute is enough.
	retryAfter := 10 * time.Second
	if r.Counted == ledger.CountedRetained {
		retryAfter = time.Minute
	}
	return nil, &BusyError{Queued: r.Queued, Limit: r.Limit, Counted: r.Counted, Scope: r.Scope + " " + namespace, RetryAfter: retryAfter}
}

func userName(u *auth.User) string {
	if u == nil {
		return ""
	}
	return u.Name
}

func (s *Service) newID() string {
	if s.NewID != nil {
		return s.NewID()
	}
	b := make([]byte, 12)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// chartRef is the chart an install or upgrade fetches, its basic auth Secret resolved as the
// console does: the request's, else for an upgrade by chart_url the one its release
// recorded, unless NoneSecret clears it; a noRepo release stays noRepo. Either is read for
// the caller only (a record is hostile input).
func chartRef(req api.ReleaseRequest, base *helmrelease.Release) chartref.Ref {
	ref := req.Chart()
	if base == nil || req.ChartURL == "" || req.IndexEntry != "" {
		return ref
	}
	recorded := chartref.RecordedURLInstall(base.Chart)
	ref.NoRepo = ref.NoRepo || recorded.Installation == chartref.InstallationURL
	switch req.BasicAuthSecretName {
	case chartref.NoneSecret:
		ref.AuthSecret = ""
	case "":
		ref.AuthSecret = recorded.AuthSecret
	default:
		ref.AuthSecret = req.BasicAuthSecretName
	}
	return ref
}

// withCaller carries the caller to the chart source, whose Secrets are read for them only.
func withCaller(ctx context.Context, c events.Caller) context.Context {
	return chartsource.WithCaller(ctx, chartsource.Caller{User: c.User, UID: c.UID, Groups: c.Groups, Extra: c.Extra})
}
