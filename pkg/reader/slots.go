package reader

import (
	"context"
	"fmt"

	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/fairqueue"
)

// readSlots is how many reads (lists, gets, histories) submit runs at once, for every
// tenant together: each holds a page of the API server's answer and up to one read's
// budget of records (release.ReadBudget).
const readSlots = 4

// seat waits for one of the read slots, handed out fairly (fairqueue) between tenants: the
// caller and the namespace read (an all-namespaces list is its caller's alone). A tenant
// holds at most all but one, so one caller's many lists never keep another tenant's waiting
// behind them.
func (s *Service) seat(ctx context.Context, u *auth.User, namespace string) (*fairqueue.Seat, error) {
	s.slotsOnce.Do(func() {
		s.slots = fairqueue.New(readSlots, fairqueue.Options{Limit: func(fairqueue.Flow) int { return readSlots - 1 }})
	})
	f := fairqueue.Flow{Namespace: namespace}
	if u != nil {
		f.Caller = u.Name
	}
	if namespace == "" {
		f.Namespace = "*/" + f.Caller // no namespace is named so
	}
	seat, err := s.slots.Acquire(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("waiting for a read slot: %w", err)
	}
	return seat, nil
}
