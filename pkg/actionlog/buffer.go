package actionlog

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"k8s.io/utils/clock"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// DefaultBytes is the buffer's default bound; MaxBytes the largest (a ConfigMap holds 1 MiB).
const (
	DefaultBytes = 256 << 10
	MaxBytes     = 768 << 10
	// lineOverhead is what a line costs beside its text once stored (seq, times, count).
	lineOverhead = 128
	// recentLines is how many latest lines a repeat is counted on (Helm's wait cycles resources).
	recentLines = 16
)

// Buffer is a ring of Helm's log lines bounded in bytes, a line equal to one of the recentLines
// before it counted on that one. Safe for concurrent use (Helm logs from several goroutines).
type Buffer struct {
	mu      sync.Mutex
	max     int
	size    int
	lines   []api.LogLine // oldest first
	next    int64         // the sequence number of the next new line
	dropped int64
	// version grows with every new line, not with a repeat (not a rewrite every flush).
	version int64
	clock   clock.PassiveClock
}

// NewBuffer keeps at most max bytes (DefaultBytes when <= 0, MaxBytes at most), dated by c.
func NewBuffer(max int, c clock.PassiveClock) *Buffer {
	if max <= 0 {
		max = DefaultBytes
	}
	return &Buffer{max: min(max, MaxBytes), next: 1, clock: wallclock.Or(c)}
}

// Log is a Helm DebugLog: the call is rendered through Format and kept.
func (b *Buffer) Log(format string, args ...any) {
	b.Append(Format(format, args...))
}

// Append keeps one already safe line.
func (b *Buffer) Append(text string) {
	t := b.clock.Now().UTC()
	b.mu.Lock()
	defer b.mu.Unlock()
	if seen := b.recent(text); seen != nil {
		seen.Repeated++
		seen.Last = &t
		return
	}
	b.version++
	b.lines = append(b.lines, api.LogLine{Seq: b.next, Time: t, Text: text})
	b.next++
	b.size += storedSize(text)
	for b.size > b.max && len(b.lines) > 1 {
		b.size -= storedSize(b.lines[0].Text)
		b.lines[0] = api.LogLine{}
		b.lines = b.lines[1:]
		b.dropped++
	}
}

// recent is the line among the recentLines latest whose text is text (nil: none).
func (b *Buffer) recent(text string) *api.LogLine {
	for i := len(b.lines) - 1; i >= 0 && i >= len(b.lines)-recentLines; i-- {
		if b.lines[i].Text == text {
			return &b.lines[i]
		}
	}
	return nil
}

// Size is what the kept lines cost once stored, about.
func (b *Buffer) Size() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.size
}

// storedSize is what a line costs once stored: its text as JSON escapes it, and the fields.
func storedSize(text string) int {
	quoted, err := json.Marshal(text)
	if err != nil {
		return 6*len(text) + lineOverhead
	}
	return len(quoted) + lineOverhead
}

// Snapshot is a copy of the kept lines, how many were dropped, and the buffer's version.
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

// FailureLogBytes bounds a TailText whatever its line count.
const FailureLogBytes = 64 << 10

// TailText is the last n kept lines as text within FailureLogBytes: a failure report's log.
func (b *Buffer) TailText(n int) string {
	lines, _, _ := b.Snapshot()
	return text(Tail(lines, n, FailureLogBytes), func(r int) string { return fmt.Sprintf(" (repeated %d times)", r) })
}

// text is lines one a line, a repeated line followed by what repeated says of its count.
func text(lines []api.LogLine, repeated func(int) string) string {
	var out strings.Builder
	for i, l := range lines {
		if i > 0 {
			out.WriteByte('\n')
		}
		out.WriteString(l.Text)
		if l.Repeated > 0 {
			out.WriteString(repeated(l.Repeated))
		}
	}
	return out.String()
}
