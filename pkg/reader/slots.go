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

// open authorizes a read of a named namespace, then waits for one of the read slots,
// handed out fairly (fairqueue) between tenants: the caller (a namespace's ServiceAccounts
// are one) and the namespace read. Only a caller who may read a namespace is ever charged
// to it: a denied read waits for nothing but its review. An all-namespaces list is its
// caller's alone (its namespaces are reviewed in the slot, readScope). A tenant holds at
// most all but one slot, so one caller's many reads never keep another tenant's waiting.
func (s *Service) open(ctx context.Context, u *auth.User, namespace string) (*fairqueue.Seat, error) {
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
	return seat, nil
}
