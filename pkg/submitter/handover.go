package submitter

import (
	"context"
	"fmt"
	"sync"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/ledger"
	"github.com/async-helm/async-helm/pkg/release/consumed"
)

// handOver waits for the ledger entry (nil recorded: written now), sends the event bound to
// its record, and if either fails (nobody will work on the revision) binds the request
// not-accepted where tenants cannot write and undoes the reservation, outliving the client.
func (s *Service) handOver(ctx context.Context, a events.Action, ev cloudevents.Event, uid types.UID, recorded func() error, undo func(context.Context) error) error {
	if len(s.SigningKey) > 0 {
		events.BindSecret(&ev, s.SigningKey, uid)
	}
	if recorded == nil {
		recorded = func() error { return s.record(ctx, a) }
	}
	err := recorded()
	if err == nil {
		err = s.Sender.Send(ctx, ev)
	}
	if err == nil {
		return nil
	}
	undoCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if berr := s.bind(undoCtx, a, uid, consumed.OutcomeNotAccepted); berr != nil {
		err = fmt.Errorf("%w; and %v", err, berr)
	}
	if uerr := undo(undoCtx); uerr != nil {
		return fmt.Errorf("%w: %v; and %v (its stored event will be re-sent by the notifier)", ErrNotAccepted, err, uerr)
	}
	return fmt.Errorf("%w: %v", ErrNotAccepted, err)
}

// recordAhead starts writing a's ledger entry beside the reservation's create, so a request
// waits for the slower of the two writes, not their sum; it returns the wait.
func (s *Service) recordAhead(ctx context.Context, a events.Action) func() error {
	if s.Ledger == nil {
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() { done <- s.record(ctx, a) }()
	return sync.OnceValue(func() error { return <-done })
}

// notReserved is the Secret UID a request is bound to when its reservation was never made.
const notReserved types.UID = "not-reserved"

// unreserved answers a request whose reservation failed (err) after its ledger entry was
// started: bound not-accepted to no Secret, its entry stops counting on every replica.
func (s *Service) unreserved(ctx context.Context, a events.Action, recorded func() error, err error) error {
	_ = recorded() // written or not, the binding clears it
	if s.Ledger == nil {
		return err
	}
	undoCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if berr := s.bind(undoCtx, a, notReserved, consumed.OutcomeNotAccepted); berr != nil {
		return fmt.Errorf("%w (its ledger entry counts until it expires: %v)", err, berr)
	}
	return err
}

// record adds the accepted request to the ledger, counted for its namespace and caller.
func (s *Service) record(ctx context.Context, a events.Action) error {
	if s.Ledger == nil {
		return nil
	}
	return s.Ledger.Add(ctx, ledger.Entry{RequestID: a.RequestID, Namespace: a.Namespace,
		Caller: ledger.CallerKey(a.Caller.User), SecretName: a.SecretName})
}
