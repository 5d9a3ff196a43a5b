package reader

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/fairqueue"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
)

// readSlots is how many reads (lists, gets, histories) submit runs at once, for every
// tenant together. Each holds a page of the API server's answer and 1/slotShare of one
// read's budget of whole records (release.ReadBudget: 32 MiB decoded) until its answer is
// written: the slots hand out submit's memory for records, 128 MiB in all.
const (
	readSlots = 4
	slotShare = 2
)

// ErrTooLarge is a read whose records pass its slot's share (413): an answer without some would
// be false (a list missing releases, an older revision shown as the latest).
var ErrTooLarge = errors.New("the release records decode to more than one read may hold")

// Option adjusts one read.
type Option func(*slot)

// UntilWritten keeps the read's slot (and its answer's records) past the read's return until
// the caller, having written the answer, calls *done; without it the read gives it back.
func UntilWritten(done *func()) Option {
	*done = func() {}
	return func(s *slot) { s.done = done }
}

// slot is a read's seat, and its Helm reads' options: its records within the slot's budget.
type slot struct {
	seat   *fairqueue.Seat
	budget *release.ReadBudget
	helm   []helmexec.Option
	done   *func()
}

// open authorizes a read of a named namespace, then waits for a read slot, handed out
// fairly between tenants (the caller, the namespace): a denied read is charged to no
// namespace, an all-namespaces list to its caller alone, and a tenant holds at most all but
// one slot, so one caller's many reads never keep another tenant's waiting.
func (s *Service) open(ctx context.Context, u *auth.User, namespace string, opts []Option) (*slot, error) {
	if namespace != "" && u != nil && s.Authorizer != nil {
		if err := s.Authorizer.Check(ctx, u, readNeed(namespace)); err != nil {
			return nil, err
		}
	}
	s.slotsOnce.Do(func() {
		s.slots = fairqueue.New(readSlots, fairqueue.Options{Limit: func(fairqueue.Flow) int { return readSlots - 1 }})
	})
	f := fairqueue.Flow{Namespace: namespace}
	if u != nil {
		f.Caller = auth.ShareName(u.Name)
	}
	if namespace == "" {
		f.Namespace = "*/" + f.Caller // no namespace is named so
	}
	seat, err := s.slots.Acquire(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("waiting for a read slot: %w", err)
	}
	sl := &slot{seat: seat, budget: release.NewReadBudgetOf(slotShare)}
	sl.helm = append(slices.Clone(s.Options), helmexec.WithReadBudget(sl.budget))
	for _, o := range opts {
		o(sl)
	}
	return sl, nil
}

// close gives the slot back, or hands it to UntilWritten's done.
func (sl *slot) close() {
	if sl.done != nil {
		*sl.done = sl.seat.Release
		return
	}
	sl.seat.Release()
}

// within is err, or ErrTooLarge when the slot's budget left records out.
func (sl *slot) within(err error) error {
	if n := sl.budget.Over(); err == nil && n > 0 {
		return fmt.Errorf("%w: %d records past %d MiB decoded; list with limitInfo=true, or read one release",
			ErrTooLarge, n, release.MaxReadBytes/slotShare>>20)
	}
	return err
}
