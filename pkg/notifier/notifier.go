// Package notifier turns status changes of Helm release secrets into CloudEvents: each is sent
// until acknowledged, then recorded on the secret: no sink outage or restart loses or repeats it.
package notifier

import (
	"context"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// Start syncs the watch (or catches up once, watch false), then reports until ctx ends.
func (s *Service) Start(ctx context.Context, watch bool) error {
	s.Init()
	if watch {
		if err := s.startIndex(ctx); err != nil {
			return err
		}
	} else if err := s.catchUp(ctx); err != nil {
		return err
	}
	if err := s.QueueTombstones(ctx); err != nil { // uninstalls finished while away
		return err
	}
	workers := s.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	for i := 0; i < workers; i++ {
		go func() {
			for s.processNext(ctx) {
			}
		}()
		go func() {
			for s.work(ctx, s.marks, s.markReported, nil, "reported status not recorded yet; will retry") {
			}
		}()
	}
	go func() {
		<-ctx.Done()
		s.queue.ShutDown()
		s.marks.ShutDown()
	}()
	if s.ProgressInterval > 0 {
		if err := s.startProgress(ctx, s.ProgressInterval); err != nil {
			return err
		}
	}
	return nil
}

// Enqueue asks for the secret namespace/name to be looked at (ApiServerSource events).
func (s *Service) Enqueue(namespace, name string) {
	s.Init()
	s.queue.Add(namespace + "/" + name)
}

// startIndex registers with the index of release secrets and waits for its first sync.
func (s *Service) startIndex(ctx context.Context) error {
	if s.Revisions == nil {
		var err error
		if s.Revisions, err = release.NewRevisionIndex(s.Metadata, s.Namespaces...); err != nil {
			return err
		}
	}
	if err := s.Revisions.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc:    s.enqueueAdded,
		UpdateFunc: func(_, obj any) { s.enqueueAdded(obj, false) },
		DeleteFunc: func(obj any) {
			key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
			if err != nil {
				return
			}
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if m, ok := obj.(*metav1.PartialObjectMetadata); ok && s.deleted(key, m) {
				s.queue.Add(key)
			}
			s.forget(key)
		},
	}); err != nil {
		return err
	}
	s.watching = true
	if err := s.watchTombstones(ctx); err != nil {
		return err
	}
	return s.Revisions.Run(ctx)
}

// observe notes the status of a secret; it reports whether something awaits reporting.
func (s *Service) observe(key string, m *metav1.PartialObjectMetadata) bool {
	rev, ok := release.RevisionFromMeta(m)
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	last, seen := s.observed[key]
	s.observed[key] = rev.Status
	switch {
	case !seen && !s.reported(rev) && !isNews(m, s.Since):
		// First sight of the cluster's past (history.go): neither reported nor marked.
		s.history[key] = true
	case !seen && !s.reported(rev):
		// First sight (start-up, or the source mode): only what was never reported.
		s.queueStatus(key, rev.Status)
	case seen && rev.Status != last:
		delete(s.history, key)
		s.queueStatus(key, rev.Status)
	}
	return len(s.backlog[key]) > 0 || !s.reported(rev) && !s.history[key]
}

// MaxBacklog bounds a Secret's statuses awaiting report: Helm moves a revision through a
// handful; a tenant flipping labels faster than the sink takes them keeps the latest.
const MaxBacklog = 16

// queueStatus adds status to key's backlog, within MaxBacklog; s.mu is held.
func (s *Service) queueStatus(key, status string) {
	b := append(s.backlog[key], status)
	if len(b) > MaxBacklog {
		b = append(make([]string, 0, MaxBacklog), b[len(b)-MaxBacklog:]...)
	}
	s.backlog[key] = b
}

func (s *Service) next(key string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.backlog[key]; len(b) > 0 {
		return b[0], true
	}
	return "", false
}

func (s *Service) pop(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if b := s.backlog[key]; len(b) > 0 {
		s.backlog[key] = b[1:]
	}
	if len(s.backlog[key]) == 0 {
		delete(s.backlog, key)
	}
}

// deleted notes a deleted secret and reports whether statuses remain to report: a hand-run
// helm uninstall's "uninstalled" (an async one's comes from its tombstone, tombstones.go).
func (s *Service) deleted(key string, m *metav1.PartialObjectMetadata) bool {
	rev, ok := release.RevisionFromMeta(m)
	if !ok {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if rev.Status == release.StatusUninstalling && m.Labels[release.LabelAction] != string(release.ActionUninstall) {
		s.queueStatus(key, events.StatusUninstalled)
	} else if rev.Ours && release.IsPending(rev.Status) {
		s.vanished[key] = true // its namespace may have gone with it (vanished.go)
	}
	if len(s.backlog[key]) == 0 && !s.vanished[key] {
		return false
	}
	s.gone[key] = rev // the last labels name the request
	return true
}

func (s *Service) forget(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.observed, key)
	delete(s.history, key) // a backlog of a deleted secret is still reported
}

// catchUp enqueues every release secret once, for transitions missed while not running.
func (s *Service) catchUp(ctx context.Context) error {
	for _, ns := range release.Watched(s.Namespaces) {
		metas, err := s.Store.ReleaseMetas(ctx, ns)
		if err != nil {
			return err
		}
		for _, m := range metas {
			s.queue.Add(m.Namespace + "/" + m.Name)
		}
	}
	return nil
}

func (s *Service) lookup(ctx context.Context, key string) (*metav1.PartialObjectMetadata, error) {
	if s.watching {
		return s.Revisions.Get(key) // nil: deleted
	}
	ns, name, _ := strings.Cut(key, "/")
	return s.Store.ReleaseMeta(ctx, ns, name)
}

func (s *Service) processNext(ctx context.Context) bool {
	return s.work(ctx, s.queue, s.syncGuarded, s.startupDone, "status not reported yet; will retry")
}

// work runs do on q's next key, then done (if set), retrying with backoff; false: q shut down.
func (s *Service) work(ctx context.Context, q workqueue.TypedRateLimitingInterface[string],
	do func(context.Context, string) error, done func(string), failed string) bool {
	key, quit := q.Get()
	if quit {
		return false
	}
	if done != nil {
		defer done(key)
	}
	defer q.Done(key)
	if err := do(ctx, key); err != nil {
		if ctx.Err() == nil {
			s.Log.Warnw(failed, "key", key, "retries", q.NumRequeues(key), "error", err)
		}
		q.AddRateLimited(key)
		return true
	}
	q.Forget(key)
	return true
}

// syncGuarded is sync with a backstop: a panic is logged and retried, never the worker's end.
func (s *Service) syncGuarded(ctx context.Context, key string) (err error) {
	defer func() {
		if r := recover(); r != nil {
			s.once.Warn(s.Log, "panic/"+key, "recovered a panic while reporting", "key", key, "panic", r)
			err = fmt.Errorf("recovered panic: %v", r)
		}
	}()
	return s.sync(ctx, key)
}

// sync reports, in order, every status not reported yet, then records the last on the secret.
func (s *Service) sync(ctx context.Context, key string) error {
	if strings.HasPrefix(key, tombstoneKey) {
		return s.syncTombstone(ctx, key)
	}
	m, err := s.lookup(ctx, key)
	if err != nil {
		return err
	}
	var rev release.Revision
	if m != nil {
		s.observe(key, m)
		rev, _ = release.RevisionFromMeta(m)
	} else {
		if err := s.checkVanished(ctx, key); err != nil {
			return err
		}
		s.mu.Lock()
		rev = s.gone[key]
		s.mu.Unlock()
	}
	for {
		status, ok := s.next(key)
		if !ok {
			break
		}
		if err := s.report(ctx, key, rev, status); err != nil {
			return err
		}
		s.pop(key)
	}
	if m == nil {
		s.mu.Lock()
		if len(s.backlog[key]) == 0 {
			delete(s.gone, key)
		}
		s.mu.Unlock()
		return nil
	}
	if s.reported(rev) || s.isHistory(key) {
		return nil
	}
	if s.watching {
		s.marks.Add(key) // recorded by a mark worker (marks.go): the next event need not wait
		return nil
	}
	return s.markNotified(ctx, rev)
}

func (s *Service) report(ctx context.Context, key string, rev release.Revision, status string) error {
	if rev.Name == "" { // deleted meanwhile: what the key says is all there is
		ns, name, _ := strings.Cut(key, "/")
		rev = release.Revision{Namespace: ns, SecretName: name}
		rev.Name, rev.Version, _ = release.ParseSecretName(name)
	}
	change := events.StatusChange{Namespace: rev.Namespace, Name: rev.Name, Revision: rev.Version,
		Status: status, RequestID: rev.RequestID}
	if err := s.describe(ctx, rev, status, &change); err != nil {
		return err
	}
	s.attachLogTail(ctx, &change)
	return s.sendStatus(ctx, change)
}

// sendStatus sends change's event, within 30 s.
func (s *Service) sendStatus(ctx context.Context, change events.StatusChange) error {
	e, err := events.NewStatus(change)
	if err != nil {
		return err
	}
	sendCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return s.Sender.Send(sendCtx, e)
}
