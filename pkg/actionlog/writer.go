package actionlog

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/pkg/wallclock"
)

// HeartbeatEvery is how often a running action's log is written even when nothing changed.
const HeartbeatEvery = 30 * time.Second

// Writer writes one action's Buffer to the Store when it changed and its budget allows, at least
// every HeartbeatEvery while it runs, and at the end. A write rewrites the whole ConfigMap, so the
// budget is a full buffer per HeartbeatEvery (two at once): a growing log is written less often.
type Writer struct {
	Store  *Store
	Buffer *Buffer
	// Clock dates the writes and times the heartbeat (nil: the wall clock).
	Clock clock.PassiveClock

	mu      sync.Mutex
	rec     Record
	version int64
	written time.Time
	ended   bool
	// spent is the bytes written over budget at spentAt, drained a buffer per HeartbeatEvery.
	spent   float64
	spentAt time.Time
}

// NewWriter starts the log of one revision's action (nothing is written yet).
func NewWriter(store *Store, buf *Buffer, rec Record, c clock.PassiveClock) *Writer {
	rec.Started, rec.Running = wallclock.Or(c).Now(), true
	return &Writer{Store: store, Buffer: buf, Clock: c, rec: rec, version: -1}
}

// Flush writes the log if it changed or a heartbeat is due; final ends it.
func (w *Writer) Flush(ctx context.Context, final bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return nil
	}
	lines, dropped, version := w.Buffer.Snapshot()
	now := wallclock.Or(w.Clock).Now()
	size := w.Buffer.Size()
	heartbeat := now.Sub(w.written) >= HeartbeatEvery
	if !final && !heartbeat && (version == w.version || !w.affords(now, size)) {
		return nil
	}
	w.rec.Lines, w.rec.Dropped, w.rec.Updated, w.rec.Running = lines, dropped, now, !final
	if err := w.Store.Write(ctx, &w.rec); err != nil {
		return err
	}
	w.spent += float64(size)
	w.version, w.written, w.ended = version, now, final
	return nil
}

// affords drains the spent bytes to now and tells whether a write of size stays within budget.
func (w *Writer) affords(now time.Time, size int) bool {
	full := float64(w.Buffer.max)
	if !w.spentAt.IsZero() {
		w.spent -= full * float64(now.Sub(w.spentAt)) / float64(HeartbeatEvery)
	}
	w.spent, w.spentAt = max(w.spent, 0), now
	return w.spent+float64(size) <= 2*full
}
