package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Group commits: the requests that reach the ledger while a write is in flight are written
// together in one Lease once it returns (under load a write per batch, not per 201; alone,
// one write as before). Every entry is still written before its request's 201.

const (
	// batchPrefix names a Lease holding a batch; annEntries holds its entries.
	batchPrefix = namePrefix + "b-"
	annEntries  = "async-helm.io/entries"
	// MaxBatch bounds the entries of one Lease (about 200 bytes each, far below the
	// 256 KiB the API server allows a Lease's annotations).
	MaxBatch = 256
	// batchTimeout bounds one batch's wait and write. The write serves every request of the
	// batch, so no one request's context is its deadline: it ends when the last of them has
	// given up (a loaded API server may take many seconds, as it may for a lone write).
	batchTimeout = 2 * time.Minute
)

// batchEntry is an entry in a batch Lease's annotation.
type batchEntry struct {
	RequestID  string `json:"r"`
	Namespace  string `json:"n"`
	Caller     string `json:"c,omitempty"`
	SecretName string `json:"s"`
	At         string `json:"a"`
}

func toBatchLease(es []Entry) (*coordinationv1.Lease, error) {
	if len(es) == 0 || len(es) > MaxBatch {
		return nil, fmt.Errorf("a ledger batch holds 1 to %d entries, not %d", MaxBatch, len(es))
	}
	out := make([]batchEntry, len(es))
	for i, e := range es {
		out[i] = batchEntry{RequestID: e.RequestID, Namespace: e.Namespace, Caller: e.Caller,
			SecretName: e.SecretName, At: e.At.UTC().Format(time.RFC3339Nano)}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return nil, fmt.Errorf("encode a ledger batch: %w", err)
	}
	suffix := make([]byte, 10)
	_, _ = rand.Read(suffix)
	return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Name:        batchPrefix + hex.EncodeToString(suffix),
		Labels:      map[string]string{Label: "true"},
		Annotations: map[string]string{annEntries: string(b)},
	}}, nil
}

// batchFromMeta reads a batch Lease's entries, leaving out any that is not whole; ok is
// false for a Lease that is no batch.
func batchFromMeta(m metav1.Object) ([]Entry, bool) {
	raw, ok := m.GetAnnotations()[annEntries]
	if !ok || m.GetLabels()[Label] != "true" || !strings.HasPrefix(m.GetName(), batchPrefix) {
		return nil, false
	}
	var in []batchEntry
	if err := json.Unmarshal([]byte(raw), &in); err != nil || len(in) > MaxBatch {
		return nil, false
	}
	out := make([]Entry, 0, len(in))
	for _, e := range in {
		at, err := time.Parse(time.RFC3339Nano, e.At)
		if err != nil || e.RequestID == "" || e.Namespace == "" {
			continue
		}
		out = append(out, Entry{RequestID: e.RequestID, Namespace: e.Namespace, Caller: e.Caller,
			SecretName: e.SecretName, At: at})
	}
	return out, true
}

// batch is the entries of one group commit and, once done is closed, its write's error.
type batch struct {
	entries []Entry
	done    chan struct{}
	err     error
	ctx     context.Context // the write's: ends when every request of the batch gave up
	cancel  context.CancelFunc
	waiting int // requests still waiting for the write
}

// commits gathers the entries added while a write is in flight (at most one at a time).
type commits struct {
	mu      sync.Mutex
	writing bool
	open    *batch
}

// join adds e to the open batch and says whether the caller must start the writer.
func (c *commits) join(e Entry) (b *batch, start bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.open == nil {
		ctx, cancel := context.WithTimeout(context.Background(), batchTimeout)
		c.open = &batch{done: make(chan struct{}), ctx: ctx, cancel: cancel}
	}
	c.open.entries = append(c.open.entries, e)
	c.open.waiting++
	b, start = c.open, !c.writing
	c.writing = true
	return b, start
}

// leave is a request of b that gives up waiting; the last one ends b's write.
func (c *commits) leave(b *batch) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if b.waiting--; b.waiting == 0 {
		b.cancel()
	}
}

// next takes the open batch for writing; nil when there is none (the writer stops).
func (c *commits) next() *batch {
	c.mu.Lock()
	defer c.mu.Unlock()
	b := c.open
	c.open = nil
	if b == nil {
		c.writing = false
	}
	return b
}

// write writes batches until none is open: one Lease per MaxBatch entries (a lone entry in
// Add's form, the same write as before group commits), counted in the Book once written.
func (l *Ledger) write() {
	for b := l.commits.next(); b != nil; b = l.commits.next() {
		for i := 0; i < len(b.entries) && b.err == nil; i += MaxBatch {
			b.err = l.writeOne(b.ctx, b.entries[i:min(i+MaxBatch, len(b.entries))])
		}
		b.cancel()
		close(b.done)
	}
}

func (l *Ledger) writeOne(ctx context.Context, es []Entry) error {
	if len(es) == 1 {
		if err := l.Store.Add(ctx, es[0]); err != nil {
			return err
		}
		l.Book.Added(es[0])
		return nil
	}
	name, err := l.Store.AddBatch(ctx, es)
	if err != nil {
		return err
	}
	l.Book.AddedBatch(name, es)
	return nil
}
