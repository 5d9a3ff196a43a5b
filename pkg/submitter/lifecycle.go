package submitter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// ErrRevisionNotFound is a rollback or an uninstall naming a revision the release does not
// have (404, worded as the console's).
var ErrRevisionNotFound = errors.New("revision not found for provided release")

// RevisionNotFoundError is an uninstall of a revision an existing release does not have.
type RevisionNotFoundError struct {
	Namespace, Name string
	Revision        int
}

func (e *RevisionNotFoundError) Error() string {
	return fmt.Sprintf("revision %d of %s/%s not found", e.Revision, e.Namespace, e.Name)
}

// Is makes errors.Is(err, ErrRevisionNotFound) true.
func (e *RevisionNotFoundError) Is(target error) bool { return target == ErrRevisionNotFound }

// UninstallAccepted is the revision an accepted uninstall marked uninstalling.
type UninstallAccepted struct {
	Revision  int
	RequestID string
	// Secret is the marked revision's secret (no data).
	Secret *corev1.Secret
	// Release is the revision as marked.
	Release *helmrelease.Release
}

// Uninstall marks the latest revision of release name uninstalling, its signed event stored
// in it, and hands the work over; version, when set, must name an existing revision.
func (s *Service) Uninstall(ctx context.Context, namespace, name, version string, user *auth.User, opts ...api.UninstallOptions) (*UninstallAccepted, error) {
	if err := api.ValidateRelease(namespace, name); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	want := 0
	if version != "" {
		v, err := strconv.Atoi(version)
		if err != nil || v < 1 {
			return nil, fmt.Errorf("%w: version %q is not a revision number", ErrInvalid, version)
		}
		want = v
	}
	// Helm run as the caller rewrites the latest record and deletes every record.
	caller, err := s.authorize(ctx, user, namespace, "update", "delete")
	if err != nil {
		return nil, err
	}
	revs, err := s.Store.LiveHistory(ctx, namespace, name)
	if err != nil {
		return nil, err
	}
	latest, err := uninstallRecord(revs, namespace, name, want)
	if err != nil {
		return nil, err
	}
	if release.IsPending(latest.Status) {
		return nil, &release.PendingError{Revision: latest.Version, Status: latest.Status}
	}
	// An uninstall's ledger entry counts like any other accepted request's.
	admitted, err := s.admit(namespace, user)
	if err != nil {
		return nil, err
	}
	defer admitted()
	id := s.newID()
	act := events.Action{
		Action: release.ActionUninstall, Namespace: namespace, Name: name, Revision: latest.Version,
		SecretName: latest.SecretName, Options: events.Options{Timeout: api.DefaultTimeout, NoHooks: noHooks(opts)},
		Caller: caller, RequestID: id,
	}
	ev, stored, err := s.signed(act)
	if err != nil {
		return nil, err
	}
	marked, err := s.Store.MarkUninstalling(ctx, release.UninstallMark{
		Namespace: namespace, Name: name, Revision: latest.Version, RequestID: id, Event: stored})
	if err != nil {
		return nil, err
	}
	if err := s.handOver(ctx, act, ev, marked.Secret.UID, nil, func(ctx context.Context) error { return s.Store.Unmark(ctx, marked) }); err != nil {
		return nil, err
	}
	return &UninstallAccepted{Revision: latest.Version, RequestID: id, Secret: forClient(marked.Secret.DeepCopy()), Release: marked.Release}, nil
}

// noHooks: any of opts (at most one is given) asks for no delete hook.
func noHooks(opts []api.UninstallOptions) bool {
	return slices.ContainsFunc(opts, func(o api.UninstallOptions) bool { return o.NoHooks })
}

// Rollback reserves the next revision as pending-rollback to revision req.Version, with the
// target's chart metadata and values, as an upgrade does.
func (s *Service) Rollback(ctx context.Context, req api.RollbackRequest, user *auth.User) (*Accepted, error) {
	if err := req.Validate(); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	return s.accept(ctx, user, req.Namespace, func(caller events.Caller, from readFrom) (*Accepted, error) {
		return s.reserveRollback(ctx, req, caller, user, from)
	})
}

// reserveRollback is Rollback once admitted: Submit's reserveAndSend for a rollback.
func (s *Service) reserveRollback(ctx context.Context, req api.RollbackRequest, caller events.Caller, user *auth.User, from readFrom) (*Accepted, error) {
	rev, old, guessed, err := s.nextRevision(ctx, req.Namespace, req.Name, release.ActionRollback, req.Supersede, from)
	if err != nil {
		return nil, err
	}
	to := req.Version
	if to == 0 {
		to = rev - 2 // Helm's default: the revision before the latest
	}
	if err := refuseTarget(old, to); err != nil {
		return nil, err
	}
	target, method, err := s.rollbackTarget(ctx, req.Namespace, req.Name, to)
	if err != nil {
		return nil, err
	}
	base, err := s.Store.Current(ctx, req.Namespace, req.Name, rev)
	if err != nil {
		return nil, err
	}
	pin, err := release.PinOf(target, method) // the executor restores only this record
	if err != nil {
		return nil, err
	}
	timeout, _ := (&api.ReleaseRequest{Timeout: req.Timeout}).ParsedTimeout() // validated above
	id := s.newID()
	act := events.Action{
		Action: release.ActionRollback, Namespace: req.Namespace, Name: req.Name, Revision: rev,
		SecretName: release.SecretName(req.Name, rev), RollbackTo: to, RollbackPin: pin,
		Options: events.Options{Timeout: timeout, Wait: req.Wait, WaitForJobs: req.WaitForJobs, Description: req.Description,
			ServerSide: string(req.ServerSide), ForceConflicts: req.ForceConflicts},
		Caller: caller, RequestID: id,
	}
	ev, stored, err := s.signed(act)
	if err != nil {
		return nil, err
	}
	if err := s.supersede(ctx, old, user, rev, id); err != nil {
		return nil, err
	}
	sec, err := s.Store.Reserve(ctx, release.Reservation{
		Namespace: req.Namespace, Name: req.Name, Action: release.ActionRollback, Revision: rev,
		Chart: target.Chart.Metadata, Values: target.Config, RequestID: id, Event: stored, Base: base,
	})
	if err != nil {
		return nil, reserveErr(err, guessed)
	}
	if err := s.handOver(ctx, act, ev, sec.UID, nil, func(ctx context.Context) error { return s.Store.Undo(ctx, sec) }); err != nil {
		return nil, err
	}
	return &Accepted{Secret: forClient(sec), Revision: rev, RequestID: id}, nil
}

// rollbackTarget reads revision to, the record a rollback restores, and its apply method
// in one read: the pin digests the record and the apply method it holds together.
func (s *Service) rollbackTarget(ctx context.Context, namespace, name string, to int) (*helmrelease.Release, string, error) {
	target, method, err := s.Store.GetWithApplyMethod(ctx, namespace, name, to)
	if to < 1 || errors.Is(err, release.ErrNotFound) {
		return nil, "", fmt.Errorf("%w: %s/%s has no revision %d", ErrRevisionNotFound, namespace, name, to)
	}
	if err != nil {
		return nil, "", err
	}
	if target.Chart == nil || target.Chart.Metadata == nil {
		return nil, "", fmt.Errorf("%w: revision %d of %s/%s records no chart", ErrRevisionNotFound, to, namespace, name)
	}
	return target, method, nil
}

// authorize checks the caller may use these verbs on Secrets in namespace, and returns
// the identity the executor acts as (empty when authentication is off).
func (s *Service) authorize(ctx context.Context, user *auth.User, namespace string, verbs ...string) (events.Caller, error) {
	if user == nil {
		return events.Caller{}, nil
	}
	if s.Authorizer != nil {
		needs := make([]auth.Need, 0, len(verbs))
		for _, v := range verbs {
			needs = append(needs, auth.Need{Verb: v, Resource: "secrets", Namespace: namespace})
		}
		if err := s.Authorizer.Check(ctx, user, needs...); err != nil {
			return events.Caller{}, err
		}
	}
	return events.Caller{User: user.Name, UID: user.UID, Groups: user.Groups, Extra: user.Extra}, nil
}

// bindQueued binds the request of a queued revision about to be failed unrun (a cancel, a
// supersede) to its Secret as cancelled, so that no delivery runs it, nor a stored event a
// tenant puts back. It is found in the Secret (cancelledRequests), never by its labels.
func (s *Service) bindQueued(ctx context.Context, rev release.Revision) error {
	if len(s.SigningKey) == 0 {
		return s.bindByLabels(ctx, rev) // no seal, no signature: the labels are all there is
	}
	reqs, uid, err := s.cancelledRequests(ctx, rev)
	if err != nil || uid == "" {
		return err
	}
	for _, a := range reqs {
		if err := s.cancelRequest(ctx, a, uid); err != nil {
			return err
		}
	}
	return nil
}

// bindByLabels is bindQueued without a signing key: the request the labels name.
func (s *Service) bindByLabels(ctx context.Context, rev release.Revision) error {
	action, ok := release.PendingAction(rev.Status)
	if !ok || !rev.Ours || rev.RequestID == "" || rev.UID == "" {
		return nil // not a reservation of ours: no event of ours to protect
	}
	return s.bind(ctx, events.Action{Action: action, Namespace: rev.Namespace, Name: rev.Name,
		Revision: rev.Version, SecretName: rev.SecretName, RequestID: rev.RequestID}, rev.UID, consumed.OutcomeCancelled)
}

// cancelledRequests are the requests that could run on the Secret rev was listed from, read
// from it now by name, with its UID: the stored event if submit signed it for this Secret,
// and the request-id label if submit's seal for this Secret verifies.
func (s *Service) cancelledRequests(ctx context.Context, rev release.Revision) ([]events.Action, types.UID, error) {
	kept, err := s.Store.KeptRequest(ctx, rev.Namespace, rev.SecretName)
	if err != nil {
		return nil, "", fmt.Errorf("find the request of %s/%s to cancel: %w", rev.Namespace, rev.SecretName, err)
	}
	if kept == nil {
		return nil, "", nil // gone: nothing left to run it on, nothing to fail
	}
	var out []events.Action
	if a, ok := s.storedRequest(kept.Event, rev); ok {
		out = append(out, a)
	}
	id := kept.Labels[release.LabelRequestID]
	meta := &metav1.ObjectMeta{Namespace: rev.Namespace, Name: rev.SecretName, Labels: kept.Labels}
	if id != "" && release.Sealed(s.SigningKey, meta) {
		out = withRequest(out, rev, id)
	}
	if s.Ledger != nil { // what submit accepted for this Secret, whatever the tenant stripped
		if id, ok := s.Ledger.Pending(rev.Namespace, rev.SecretName); ok {
			out = withRequest(out, rev, id)
		}
	}
	return out, kept.UID, nil
}

// withRequest adds request id of rev to out unless it is there already.
func withRequest(out []events.Action, rev release.Revision, id string) []events.Action {
	for _, a := range out {
		if a.RequestID == id {
			return out
		}
	}
	action, _ := release.PendingAction(rev.Status) // only a record: the outcome is what counts
	return append(out, events.Action{Action: action, Namespace: rev.Namespace, Name: rev.Name,
		Revision: rev.Version, SecretName: rev.SecretName, RequestID: id})
}

// storedRequest is the accepted request of a stored event, if submit signed it for this
// namespace and Secret (its age is not checked: binding an expired one costs nothing).
func (s *Service) storedRequest(stored []byte, rev release.Revision) (events.Action, bool) {
	var e cloudevents.Event
	if len(stored) == 0 || e.UnmarshalJSON(stored) != nil || events.Verify(e, s.SigningKey, e.Time(), time.Minute) != nil {
		return events.Action{}, false
	}
	a, err := events.ParseAccepted(e)
	if err != nil || e.ID() != a.RequestID || a.Namespace != rev.Namespace || a.SecretName != rev.SecretName {
		return events.Action{}, false
	}
	return a, true
}

// cancelRequest binds a to the Secret uid as cancelled (one bound to another UID runs
// nowhere); one an executor bound here and lost is marked cancelled, so no delivery
// resumes it on a record rewound in place.
func (s *Service) cancelRequest(ctx context.Context, a events.Action, uid types.UID) error {
	if s.Bindings == nil {
		return nil
	}
	first, err := s.Bindings.Consume(ctx, s.binding(a, uid, consumed.OutcomeCancelled))
	if errors.Is(err, consumed.ErrConsumedElsewhere) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("bind cancelled request %s to %s/%s: %w", a.RequestID, a.Namespace, a.SecretName, err)
	}
	if first {
		return nil
	}
	rec, err := s.Bindings.Lookup(ctx, a.RequestID)
	if err != nil || rec == nil || rec.Outcome != "" {
		return err
	}
	if err := s.Bindings.MarkDone(ctx, a.RequestID, consumed.OutcomeCancelled); err != nil {
		return fmt.Errorf("record the cancel of request %s: %w", a.RequestID, err)
	}
	return nil
}

// bind records where tenants cannot write that a request that will not run from its
// delivery belongs to the Secret uid only (no-op without Bindings); the executor binds
// the others when it first runs them.
func (s *Service) bind(ctx context.Context, a events.Action, uid types.UID, outcome string) error {
	if s.Bindings == nil {
		return nil
	}
	_, err := s.Bindings.Consume(ctx, s.binding(a, uid, outcome))
	if err != nil && !errors.Is(err, consumed.ErrConsumedElsewhere) {
		return fmt.Errorf("bind request %s to %s/%s: %w", a.RequestID, a.Namespace, a.SecretName, err)
	}
	return nil
}

// binding is the consumed record that binds a's request to the Secret uid with outcome.
func (s *Service) binding(a events.Action, uid types.UID, outcome string) consumed.Record {
	return consumed.Record{RequestID: a.RequestID, Namespace: a.Namespace, Name: a.Name,
		Action: string(a.Action), Revision: a.Revision, SecretUID: uid, At: wallclock.Or(s.Clock).Now(), Outcome: outcome}
}

// signed builds and signs the accepted event of an action, and its stored (JSON) form.
func (s *Service) signed(a events.Action) (cloudevents.Event, []byte, error) {
	ev, err := events.NewAccepted(a)
	if err != nil {
		return ev, nil, fmt.Errorf("build the accepted event: %w", err)
	}
	if len(s.SigningKey) > 0 {
		events.Sign(&ev, s.SigningKey, wallclock.Or(s.Clock).Now())
	}
	stored, err := ev.MarshalJSON()
	if err != nil {
		return ev, nil, fmt.Errorf("encode the accepted event: %w", err)
	}
	return ev, stored, nil
}

// uninstallRecord is the release's own newest record, as a cancel finds it (latestRecord),
// not the history's first, which a tenant's labels choose; want, if set, must be one too.
func uninstallRecord(revs []release.Revision, namespace, name string, want int) (release.Revision, error) {
	latest, ok := latestRecord(revs, name)
	if !ok {
		return latest, fmt.Errorf("%w: %s/%s", release.ErrNotFound, namespace, name)
	}
	if want > 0 && !hasRecord(revs, release.SecretName(name, want)) {
		return latest, &RevisionNotFoundError{Namespace: namespace, Name: name, Revision: want}
	}
	return latest, nil
}

// hasRecord says whether revs holds the record of Secret secretName.
func hasRecord(revs []release.Revision, secretName string) bool {
	return slices.ContainsFunc(revs, func(r release.Revision) bool { return r.SecretName == secretName })
}

// ErrStillRunning is a wait that ended before the action did; the action goes on.
var ErrStillRunning = errors.New("the action is still running")

// Await polls the cache every `every` until revision, as written for requestID, is no
// longer pending; gone (an uninstall's end) is confirmed with the API server. At ctx's end,
// ErrStillRunning.
func (s *Service) Await(ctx context.Context, namespace, name string, revision int, requestID string, every time.Duration) (rev release.Revision, gone bool, err error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		revs, err := s.Store.History(ctx, namespace, name)
		if err != nil && ctx.Err() == nil {
			return rev, false, err
		}
		rev, found := find(revs, revision, requestID)
		if err == nil && !found {
			// The cache may not have seen the request's write yet: only the API server says gone.
			revs, err = s.Store.LiveHistory(ctx, namespace, name)
			if err != nil && ctx.Err() == nil {
				return rev, false, err
			}
			rev, found = find(revs, revision, requestID)
		}
		switch {
		case err == nil && !found:
			return rev, true, nil
		case err == nil && !release.IsPending(rev.Status):
			return rev, false, nil
		}
		select {
		case <-ctx.Done():
			return rev, false, fmt.Errorf("%w: revision %d of %s/%s is %s", ErrStillRunning, revision, namespace, name, rev.Status)
		case <-t.C:
		}
	}
}

// find is the revision version as written for requestID.
func find(revs []release.Revision, version int, requestID string) (release.Revision, bool) {
	i := slices.IndexFunc(revs, func(r release.Revision) bool { return r.Version == version && r.RequestID == requestID })
	if i < 0 {
		return release.Revision{}, false
	}
	return revs[i], true
}
