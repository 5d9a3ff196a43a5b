package notifier

import (
	"context"
	"fmt"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/lease"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// "uninstalled" is found through the uninstall's Lease, kept by its executor as a tombstone
// (docs/design.md); tombstones share the status queue, under keys with this prefix.
const tombstoneKey = "tombstone:"

// watchTombstones reports tombstones as soon as the executor retires them (watch mode).
func (s *Service) watchTombstones(ctx context.Context) error {
	enqueue := func(obj any) {
		if l, ok := obj.(*coordinationv1.Lease); ok {
			if t, ok := lease.TombstoneFrom(l); ok && t.Done {
				s.queue.Add(tombstoneKey + l.Namespace + "/" + l.Name)
			}
		}
	}
	return s.leases.watch(ctx, s.Client, release.Watched(s.Namespaces), cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueue,
		UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
}

// QueueTombstones queues the cached tombstones (no event announces a dead executor's Lease
// expiring) and a page of the others; the leader's sweeper calls it every pass.
func (s *Service) QueueTombstones(ctx context.Context) error {
	if cached, full, ok := s.leases.list(); ok && s.watching {
		s.queueTombstones(cached)
		return s.pageTombstones(ctx, full)
	}
	return s.pageTombstones(ctx, release.Watched(s.Namespaces))
}

// queueTombstones queues the cached tombstones but those of uninstalls the cache shows alive.
func (s *Service) queueTombstones(cached []*coordinationv1.Lease) {
	now := wallclock.Or(s.Clock).Now()
	for _, l := range cached {
		t, ok := lease.TombstoneFrom(l)
		if !ok || (!t.Done && release.AliveIn(s.leases.get(t.Namespace, release.LeaseName(t.Name, t.Revision)), now)) {
			continue
		}
		s.queue.Add(tombstoneKey + l.Namespace + "/" + l.Name)
	}
}

// pageTombstones reads one page (50) of the tombstones of one of namespaces a pass, in turn,
// each from where its last page ended: a namespace that floods costs a pass one page.
func (s *Service) pageTombstones(ctx context.Context, full []string) error {
	if len(full) == 0 {
		return nil
	}
	full = slices.Sorted(slices.Values(full))
	s.mu.Lock()
	ns, cont := s.graves.namespace, s.graves.cont
	if cont == "" || !slices.Contains(full, ns) {
		i, found := slices.BinarySearch(full, ns)
		if found {
			i++
		}
		ns, cont = full[i%len(full)], ""
	}
	s.mu.Unlock()
	page, next, err := s.Store.TombstonePage(ctx, ns, cont)
	s.mu.Lock()
	s.graves.namespace, s.graves.cont = ns, next
	s.mu.Unlock()
	for _, t := range page {
		s.queue.Add(tombstoneKey + t.Namespace + "/" + t.Lease())
	}
	return err
}

// syncTombstone reports "uninstalled" for a finished uninstall, then deletes its tombstone.
func (s *Service) syncTombstone(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(strings.TrimPrefix(key, tombstoneKey), "/")
	grave, err := s.Store.ReadTombstone(ctx, ns, name)
	if err != nil || grave == nil {
		return err // nil: gone, or not a tombstone
	}
	t := *grave
	refusal, done, err := s.checkTombstone(ctx, t)
	if err != nil {
		return err
	}
	if refusal != "" {
		s.once.Warn(s.Log, "tombstone/"+t.LeaseUID(), "tombstone not reported; deleted",
			"namespace", ns, "lease", name, "reason", refusal)
		return s.Store.BuryTombstone(ctx, t)
	}
	if !done {
		if done, err = s.abandonedDone(ctx, t); !done || err != nil {
			return err
		}
	}
	change := events.StatusChange{Namespace: ns, Name: t.Name, Revision: t.Revision,
		Status: events.StatusUninstalled, RequestID: t.RequestID}
	change.Chart, change.ChartVersion, _ = release.ParseChartLabel(t.Chart)
	if err := s.sendStatus(ctx, change); err != nil {
		return err
	}
	return s.Store.BuryTombstone(ctx, t)
}

// abandonedDone decides an unfinished tombstone once no executor holds the revision's Lease:
// Helm finished if the Secret is gone or replaced and the executor recorded it (goneDone); a
// pending Secret is the sweeper's; a final one failed: buried without an event.
func (s *Service) abandonedDone(ctx context.Context, t lease.Tombstone) (bool, error) {
	alive, err := s.Store.Alive(ctx, t.Namespace, release.LeaseName(t.Name, t.Revision))
	if alive || err != nil {
		return false, err
	}
	m, err := s.Store.ReleaseMeta(ctx, t.Namespace, t.SecretName())
	if err != nil {
		return false, err
	}
	if m == nil || string(m.UID) != t.SecretUID {
		return s.goneDone(ctx, t)
	}
	if rev, ok := release.RevisionFromMeta(m); ok && release.IsPending(rev.Status) {
		return false, nil
	}
	return false, s.Store.BuryTombstone(ctx, t)
}

// goneDone decides an abandoned tombstone whose Secret is gone (a tenant can delete it too): only
// the executor's outcome, read again, says Helm uninstalled; without it, deleted unreported.
func (s *Service) goneDone(ctx context.Context, t lease.Tombstone) (bool, error) {
	if s.Consumed == nil {
		return true, nil
	}
	_, done, err := s.checkTombstone(ctx, t)
	if done || err != nil {
		return done, err
	}
	s.once.Warn(s.Log, "tombstone/"+t.LeaseUID(), "tombstone not reported: its Secret is gone but the executor recorded no uninstall; deleted",
		"namespace", t.Namespace, "lease", t.Lease(), "requestId", t.RequestID)
	return false, s.Store.BuryTombstone(ctx, t)
}

// checkTombstone says why a tombstone Lease (a tenant may write it) is not of an uninstall
// async-helm ran: misnamed, or no uninstall of that revision consumed for that Secret. done:
// the executor's outcome on the consumed record, written before the Lease is finished, says
// Helm uninstalled (a Lease that says so without it is a forgery).
func (s *Service) checkTombstone(ctx context.Context, t lease.Tombstone) (refusal string, done bool, err error) {
	if !t.WellNamed() {
		return "its Lease is not named as the executor names tombstones", false, nil
	}
	if s.Consumed == nil {
		return "", t.Done, nil
	}
	rec, err := s.Consumed.Lookup(ctx, t.RequestID)
	if err != nil {
		return "", false, err
	}
	if rec == nil || rec.Action != string(release.ActionUninstall) || rec.Namespace != t.Namespace ||
		rec.Name != t.Name || rec.Revision != t.Revision || string(rec.SecretUID) != t.SecretUID {
		return fmt.Sprintf("no uninstall of %s/%s revision %d was consumed for request %s", t.Namespace, t.Name, t.Revision, t.RequestID), false, nil
	}
	done = rec.Outcome == consumed.OutcomeUninstalled
	if t.Done && !done {
		return fmt.Sprintf("its Lease says uninstalled but the executor recorded no outcome for request %s", t.RequestID), false, nil
	}
	return "", done, nil
}
