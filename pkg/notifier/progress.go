package notifier

import (
	"context"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// progressEvents reports the progress on revisions' Leases as events: at most one per
// revision every interval, the latest winning. A live view: one lost is not resent.
type progressEvents struct {
	s        *Service
	interval time.Duration
	mu       sync.Mutex
	latest   map[string]*events.ProgressChange // by lease key, not sent yet
	sent     map[string]time.Time              // progress time last sent, by lease key
}

func (s *Service) startProgress(ctx context.Context, interval time.Duration) error {
	p := &progressEvents{s: s, interval: interval, latest: map[string]*events.ProgressChange{}, sent: map[string]time.Time{}}
	if err := s.leases.watch(ctx, s.Client, release.Watched(s.Namespaces), cache.ResourceEventHandlerFuncs{
		AddFunc:    p.observe,
		UpdateFunc: func(_, obj any) { p.observe(obj) },
		DeleteFunc: p.forget,
	}); err != nil {
		return err
	}
	go wallclock.Every(ctx, s.Clock, p.interval, func() { p.tick(ctx) })
	return nil
}

func (p *progressEvents) observe(obj any) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok {
		return
	}
	pr, err := progress.Decode(l.Annotations[lease.AnnotationProgress])
	name, rev, named := release.ParseSecretName(l.Name)
	if err != nil || pr == nil || !named {
		return
	}
	key := l.Namespace + "/" + l.Name
	p.mu.Lock()
	defer p.mu.Unlock()
	if !pr.Updated.After(p.sent[key]) {
		return
	}
	p.latest[key] = &events.ProgressChange{Namespace: l.Namespace, Name: name, Revision: rev, Progress: *pr}
}

func (p *progressEvents) forget(obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.latest, key)
	delete(p.sent, key)
}

// ProgressPerNamespace bounds a namespace's progress events an interval: none holds the rest back.
const ProgressPerNamespace = 16

// tick sends the latest progress not sent yet, at most ProgressPerNamespace a namespace.
func (p *progressEvents) tick(ctx context.Context) {
	p.mu.Lock()
	batch, perNS := map[string]*events.ProgressChange{}, map[string]int{}
	for key, c := range p.latest {
		if perNS[c.Namespace] < ProgressPerNamespace {
			perNS[c.Namespace]++
			batch[key] = c
			delete(p.latest, key)
		}
	}
	p.mu.Unlock()
	for key, c := range batch {
		e, err := events.NewProgress(*c)
		if err == nil {
			sendCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
			err = p.s.Sender.Send(sendCtx, e)
			cancel()
		}
		if err != nil {
			p.s.Log.Debugw("progress event not sent", "key", key, "error", err)
			continue
		}
		p.mu.Lock()
		p.sent[key] = c.Progress.Updated
		p.mu.Unlock()
	}
}
