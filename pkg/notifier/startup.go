package notifier

import (
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// StartupAtOnce bounds the start-up backlog in the queue at once, so the other workers report
// live changes at once (a fresh notifier's backlog of 39,180 events held every change back).
const StartupAtOnce = 8

// startupFeed holds the start-up backlog's keys not yet queued, one namespace at a time in
// turn (a list is sorted by namespace), and those queued and not yet done.
type startupFeed struct {
	mu   sync.Mutex
	keys *keysByNamespace
	fed  map[string]bool
}

// enqueueAdded: a first-list record to report joins the start-up backlog; a later one is queued.
func (s *Service) enqueueAdded(obj any, inInitialList bool) {
	m, ok := obj.(*metav1.PartialObjectMetadata)
	if !ok {
		return
	}
	key := m.Namespace + "/" + m.Name
	switch {
	case !s.observe(key, m):
	case !inInitialList:
		s.queue.Add(key)
	default:
		s.startup.mu.Lock()
		if s.startup.keys == nil {
			s.startup.keys = newKeysByNamespace()
		}
		s.startup.keys.Push(key)
		s.startup.mu.Unlock()
		s.feedStartup()
	}
}

// feedStartup queues held start-up keys while fewer than StartupAtOnce are in flight.
func (s *Service) feedStartup() {
	f := &s.startup
	f.mu.Lock()
	var add []string
	for f.keys != nil && f.keys.Len() > 0 && len(f.fed) < StartupAtOnce {
		k := f.keys.Pop()
		if f.fed == nil {
			f.fed = map[string]bool{}
		}
		if !f.fed[k] {
			f.fed[k] = true
			add = append(add, k)
		}
	}
	if f.keys != nil && f.keys.Len() == 0 {
		f.keys = nil // the backlog's arrays are not kept once drained
	}
	f.mu.Unlock()
	for _, k := range add {
		s.queue.Add(k)
	}
}

// startupDone frees key's start-up place, if any (a retry goes on as others), and feeds the next.
func (s *Service) startupDone(key string) {
	f := &s.startup
	f.mu.Lock()
	_, was := f.fed[key]
	delete(f.fed, key)
	f.mu.Unlock()
	if was {
		s.feedStartup()
	}
}
