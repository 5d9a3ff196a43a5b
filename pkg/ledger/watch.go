package ledger

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// Ledger is the ledger as submit uses it: the Store it writes and the Book it counts (and
// answers Counts, Admit and Pending from).
type Ledger struct {
	Store *Store
	*Book
	// Clock dates the entries (nil: the wall clock); the Book has its own.
	Clock clock.WithTicker
	// CleanEvery is how often consumed and expired entries are deleted (default 30 s).
	CleanEvery time.Duration

	commits commits // the group commit under way (batch.go)
	gone    *nsGone // the namespaces informer, when ClearDeletedNamespaces was called
}

// Add writes the entry, with those of the requests that come while a write is in flight
// (batch.go), and counts it at once in this replica (the watch brings it to the others).
// It returns once the entry is written, or ctx ends: then the entry may still be written.
func (l *Ledger) Add(ctx context.Context, e Entry) error {
	if e.At.IsZero() {
		e.At = wallclock.Or(l.Clock).Now()
	}
	b, start := l.commits.join(e)
	if start {
		go l.write()
	}
	select {
	case <-b.done:
		return b.err
	case <-ctx.Done():
		l.commits.leave(b)
		return fmt.Errorf("record accepted request %s in the ledger: %w", e.RequestID, ctx.Err())
	}
}

// Run watches the entries and the consumed records into the Book until they are listed,
// and deletes consumed and expired entries every CleanEvery until ctx ends.
func (l *Ledger) Run(ctx context.Context) error {
	var synced []cache.InformerSynced
	for _, w := range []struct {
		label       string
		add, delete func(metav1.Object)
	}{
		{Label, l.added, func(m metav1.Object) { l.Book.Removed(m.GetName()) }},
		{consumed.Label, l.consumed, func(m metav1.Object) { l.Book.Pruned(m.GetName()) }},
	} {
		f := informers.NewSharedInformerFactoryWithOptions(l.Store.Client, 0, informers.WithNamespace(l.Store.ns()),
			informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = w.label + "=true" }))
		inf := f.Coordination().V1().Leases().Informer()
		if err := inf.SetTransform(kube.DropManagedFields); err != nil {
			return fmt.Errorf("watch %s: %w", w.label, err)
		}
		reg, err := inf.AddEventHandler(handler(w.label, w.add, w.delete))
		if err != nil {
			return fmt.Errorf("watch %s: %w", w.label, err)
		}
		synced = append(synced, reg.HasSynced)
		f.Start(ctx.Done())
	}
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		return fmt.Errorf("the ledger's watch did not sync: %w", ctx.Err())
	}
	l.gone.retainedOfMissing(l.Book)
	go l.clean(ctx)
	return nil
}

func (l *Ledger) added(m metav1.Object) {
	if es, ok := batchFromMeta(m); ok {
		l.Book.AddedBatch(m.GetName(), es)
	} else if e, ok := fromMeta(m); ok {
		l.Book.Added(e)
	}
}

// consumed counts a consumed record for its tenant; one whose namespace or time cannot be
// read counts for its entry's namespace, from now.
func (l *Ledger) consumed(m metav1.Object) {
	var c Consumption
	if ns, at, ok := consumed.TenantOf(m); ok {
		c = Consumption{Namespace: ns, At: at}
	}
	l.Book.ConsumedAs(m.GetName(), c)
}

// handler calls add for the Leases labelled label and delete for those gone; an update is
// an add (they are named for their request, and only their presence counts).
func handler(label string, add, del func(metav1.Object)) cache.ResourceEventHandler {
	meta := func(obj any) (metav1.Object, bool) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		l, ok := obj.(*coordinationv1.Lease)
		return l, ok && l.Labels[label] == "true"
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { onMeta(obj, meta, add) },
		UpdateFunc: func(_, obj any) { onMeta(obj, meta, add) },
		DeleteFunc: func(obj any) { onMeta(obj, meta, del) },
	}
}

func onMeta(obj any, meta func(any) (metav1.Object, bool), f func(metav1.Object)) {
	if m, ok := meta(obj); ok {
		f(m)
	}
}

// clean deletes the entries the Book no longer counts, every CleanEvery.
func (l *Ledger) clean(ctx context.Context) {
	every := l.CleanEvery
	if every <= 0 {
		every = 30 * time.Second
	}
	wallclock.Every(ctx, l.Clock, every, func() { l.deleteStale(ctx) })
}

// deleteStale deletes what the Book cleared, the entries of namespaces that are gone
// included; a failed delete is tried again next time.
func (l *Ledger) deleteStale(ctx context.Context) {
	l.gone.sweep(l.Book)
	for _, name := range l.Book.Expire() {
		if err := l.Store.Delete(ctx, name); err != nil {
			l.Book.retry(name)
		}
	}
}

// ClearDeletedNamespaces has the Book forget the entries of each namespace namespaces (an
// informer of Namespaces) reports deleted, or does not hold at two cleanings in a row.
func (l *Ledger) ClearDeletedNamespaces(namespaces cache.SharedInformer) error {
	l.gone = &nsGone{store: namespaces.GetStore(), synced: namespaces.HasSynced}
	_, err := namespaces.AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: func(obj any) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if m, ok := obj.(metav1.Object); ok {
			l.Book.NamespaceGone(m.GetName())
		}
	}})
	if err != nil {
		return fmt.Errorf("watch namespaces for the ledger: %w", err)
	}
	return nil
}
