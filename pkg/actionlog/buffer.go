package actionlog

import (
	"sync"
	"time"

	"github.com/async-helm/async-helm/pkg/api"
)

// DefaultBytes is the buffer's bound when none is configured; MaxBytes the largest allowed
// (a ConfigMap holds at most 1 MiB, the JSON around the lines included).
const (
	DefaultBytes = 256 << 10
	MaxBytes     = 768 << 10
	// lineOverhead is what a line costs beside its text once stored (seq, times, JSON).
	lineOverhead = 96
)

// Buffer is a ring of Helm's log lines bounded in bytes: the oldest lines go first. A line
// equal to the one before it is counted on that one (Helm repeats "not ready" every 2 s
// while it waits). Safe for concurrent use: Helm logs from several goroutines.
type Buffer struct {
	mu      sync.Mutex
	max     int
	size    int
	lines   []api.LogLine // oldest first
	next    int64         // the sequence number of the next new line
	dropped int64
	version int64 // grows with every change, repeats included
	now     func() time.Time
}

// NewBuffer keeps at most max bytes of lines (DefaultBytes when max <= 0, MaxBytes at
// most); now is the clock of the lines' times (time.Now when nil).
func NewBuffer(max int, now func() time.Time) *Buffer {
	if max <= 0 {
		max = DefaultBytes
	}
	if max > MaxBytes {
		max = MaxBytes
	}
	if now == nil {
		now = time.Now
	}
	return &Buffer{max: max, next: 1, now: now}
}

// Log is a Helm DebugLog: the call is rendered through Format and kept.
func (b *Buffer) Log(format string, args ...interface{}) {
	b.Append(Format(format, args...))
}

// Append keeps one already safe line.
func (b *Buffer) Append(text string) {
	t := b.now().UTC()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.version++
	if n := len(b.lines); n > 0 && b.lines[n-1].Text == text {
		last := &b.lines[n-1]
		last.Repeated++
		last.Last = &t
		return
	}
	b.lines = append(b.lines, api.LogLine{Seq: b.next, Time: t, Text: text})
	b.next++
	b.size += len(text) + lineOverhead
	for b.size > b.max && len(b.lines) > 1 {
		b.size -= len(b.lines[0].Text) + lineOverhead
		b.lines[0] = api.LogLine{}
		b.lines = b.lines[1:]
		b.dropped++
	}
}

// Snapshot is a copy of the kept lines, how many were dropped, and the buffer's version
// (it changes with every Append).
func (b *Buffer) Snapshot() (lines []api.LogLine, dropped, version int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]api.LogLine, len(b.lines))
	copy(out, b.lines)
	return out, b.dropped, b.version
}

// Tail is the last n lines of lines that fit in maxBytes of text, oldest first.
func Tail(lines []api.LogLine, n, maxBytes int) []api.LogLine {
	start, size := len(lines), 0
	for start > 0 && len(lines)-start < n {
		size += len(lines[start-1].Text) + 1
		if size > maxBytes {
			break
		}
		start--
	}
	return lines[start:]
}
