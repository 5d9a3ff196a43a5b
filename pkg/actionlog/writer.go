package actionlog

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/pkg/wallclock"
)

// HeartbeatEvery is how often a running action's log is written even when Helm logged
// nothing new: a reader takes a log unwritten for StaleAfter as abandoned.
const HeartbeatEvery = 30 * time.Second

// Writer writes one action's Buffer to the Store: when it changed, at least every
// HeartbeatEvery while it runs, and once at the end.
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
}

// NewWriter starts the log of one revision's action (nothing is written yet); c dates it
// (nil: the wall clock).
func NewWriter(store *Store, buf *Buffer, rec Record, c clock.PassiveClock) *Writer {
	rec.Started, rec.Running = wallclock.Or(c).Now(), true
	return &Writer{Store: store, Buffer: buf, Clock: c, rec: rec, version: -1}
}

// Flush writes the log if it changed since the last write or a heartbeat is due; final
// marks it ended (after which nothing more is written).
func (w *Writer) Flush(ctx context.Context, final bool) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.ended {
		return nil
	}
	lines, dropped, version := w.Buffer.Snapshot()
	now := wallclock.Or(w.Clock).Now()
	if !final && version == w.version && now.Sub(w.written) < HeartbeatEvery {
		return nil
	}
	w.rec.Lines, w.rec.Dropped, w.rec.Updated, w.rec.Running = lines, dropped, now, !final
	if err := w.Store.Write(ctx, &w.rec); err != nil {
		return err
	}
	w.version, w.written, w.ended = version, now, final
	return nil
}
