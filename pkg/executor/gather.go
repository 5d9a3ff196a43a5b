package executor

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// gather asks q and keeps its answer in v (decide.go); an error ends the delivery with a
// redelivery. Two questions are writes whose answer decides (qBind, qBindAccepted: the
// consumed record's create; qResume: the resume count); the rest read.
func (s *Service) gather(ctx context.Context, act *action, v *view, q question) error {
	switch q {
	case qLook, qRecord:
		var read *recordRead
		if err := s.decoding(ctx, act, func() (err error) { read, err = s.readRecord(ctx, act); return err }); err != nil {
			return err
		}
		if q == qLook {
			v.look = read
			return nil
		}
		v.rec, act.rec = read, read.rel
	case qLease:
		held, err := s.Heartbeat.Hold(ctx, act.Namespace, release.LeaseName(act.Name, act.Revision), act.RequestID)
		if err != nil {
			return err
		}
		if held != nil {
			act.held = held
		}
		v.lease = &leaseRead{held: held != nil}
	case qCancel:
		v.cancel = &cancelRead{by: act.held.CancelledBy()}
	case qLatest:
		var revs []release.Revision
		if err := s.decoding(ctx, act, func() (err error) { revs, err = s.Store.LiveHistory(ctx, act.Namespace, act.Name); return err }); err != nil {
			return err
		}
		v.latest = &latestRead{}
		if len(revs) > 0 {
			v.latest.rev = &revs[0]
		}
	default:
		return s.gatherConsumed(ctx, act, v, q)
	}
	return nil
}

// decoding runs read, which decodes records a tenant can write, holding a CPU slot in the
// action's flow for the read alone (docs/design.md, "Tenants and shares").
func (s *Service) decoding(ctx context.Context, act *action, read func() error) error {
	seat, err := s.cpu.Acquire(ctx, flowOf(act.Action))
	if err != nil {
		return fmt.Errorf("waiting for a CPU slot to read the record: %w", err)
	}
	defer seat.Release()
	return read()
}

// gatherConsumed asks what the consumed records say of the request.
func (s *Service) gatherConsumed(ctx context.Context, act *action, v *view, q question) error {
	var err error
	switch q {
	case qMeta:
		v.meta, err = s.readMeta(ctx, act)
	case qBindAccepted:
		_, err = s.Consumed.Consume(ctx, s.binding(act, act.BoundSecretUID))
		if errors.Is(err, consumed.ErrConsumedElsewhere) {
			err = nil
		}
		v.boundAccepted = err == nil
	case qBind:
		v.bind, err = s.bind(ctx, act, v.meta)
	case qConsumed:
		var rec *consumed.Record
		if rec, err = s.Consumed.Lookup(ctx, act.RequestID); err == nil {
			v.consumed = &consumedRead{rec: rec}
		}
	case qSteps:
		var st consumed.Steps
		if st, err = s.Consumed.StepsOf(ctx, act.RequestID); err == nil {
			v.steps = &st
		}
	case qResume:
		err = s.Consumed.ClaimResume(ctx, act.RequestID)
		if errors.Is(err, consumed.ErrTooManyResumes) {
			v.resume, err = &resumeRead{tooMany: err}, nil
		} else if err == nil {
			v.resume, act.resumed = &resumeRead{}, true
		}
	}
	return err
}

// readRecord reads the revision's record (rel nil when it is gone), and whether a refusal
// may fail it: submit sealed it for this request, it is queued and of this revision.
func (s *Service) readRecord(ctx context.Context, act *action) (*recordRead, error) {
	rel, err := s.Store.Get(ctx, act.Namespace, act.Name, act.Revision)
	if errors.Is(err, release.ErrNotFound) {
		return &recordRead{}, nil
	}
	if err != nil {
		return nil, err
	}
	return &recordRead{rel: rel, sealedQueued: s.sealedQueued(act, rel)}, nil
}

func (s *Service) sealedQueued(act *action, rel *helmrelease.Release) bool {
	secret := &metav1.ObjectMeta{Namespace: act.Namespace, Name: release.SecretName(act.Name, act.Revision), Labels: rel.Labels}
	return len(s.SealKey) > 0 && secret.Labels[release.LabelQueued] == "true" &&
		secret.Labels[release.LabelRevision] == strconv.Itoa(act.Revision) && release.Sealed(s.SealKey, secret)
}

// readMeta reads the Secret's metadata: its UID, the identity a request is consumed for.
func (s *Service) readMeta(ctx context.Context, act *action) (*metaRead, error) {
	meta, err := s.Store.SecretMeta(ctx, act.Namespace, act.SecretName)
	if err != nil || meta == nil {
		return &metaRead{}, err
	}
	return &metaRead{uid: meta.GetUID()}, nil
}

// bind consumes the request for this Secret.
func (s *Service) bind(ctx context.Context, act *action, meta *metaRead) (*bindRead, error) {
	first, err := s.Consumed.Consume(ctx, s.binding(act, meta.uid))
	if errors.Is(err, consumed.ErrConsumedElsewhere) {
		return &bindRead{elsewhere: err}, nil
	}
	if err != nil {
		return nil, err
	}
	return &bindRead{first: first}, nil
}

// binding is the consumed record that binds the request to the Secret uid.
func (s *Service) binding(act *action, uid types.UID) consumed.Record {
	return consumed.Record{RequestID: act.RequestID, Namespace: act.Namespace, Name: act.Name,
		Action: string(act.Action.Action), Revision: act.Revision, SecretUID: uid, At: wallclock.Or(s.Clock).Now()}
}
