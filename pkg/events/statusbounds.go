package events

import (
	"strconv"
	"strings"
	"unicode/utf8"
)

// Bounds of the text a status event carries. Its reason and chart fields come from a release
// record, which the tenant can write (up to the record's decoded bound, many MiB): the event
// carries at most these, far more than Helm's own reasons, chart names and versions take.
const (
	// MaxReasonBytes bounds Reason: its start and its end are kept (Helm wraps the cause,
	// which may come last), the middle cut with a marker saying how much.
	MaxReasonBytes = 4 << 10
	// MaxLogTailBytes bounds LogTail (the action log's tail is already cut to 4 KiB).
	MaxLogTailBytes = 4 << 10
	// MaxChartFieldBytes bounds Chart, ChartVersion and AppVersion each.
	MaxChartFieldBytes = 256
)

// Bounded is s with its reason, log tail and chart fields within the bounds above: text over
// a bound keeps its start and end around a marker ` …[N bytes cut]… `, and is a copy, so the
// event holds nothing of the record it was read from. NewStatus sends only bounded changes.
func (s StatusChange) Bounded() StatusChange {
	s.Reason = clip(s.Reason, MaxReasonBytes)
	s.LogTail = clip(s.LogTail, MaxLogTailBytes)
	s.Chart = clip(s.Chart, MaxChartFieldBytes)
	s.ChartVersion = clip(s.ChartVersion, MaxChartFieldBytes)
	s.AppVersion = clip(s.AppVersion, MaxChartFieldBytes)
	return s
}

// clipMarkerBytes is room for the marker: " …[" + up to 20 digits + " bytes cut]… ".
const clipMarkerBytes = 48

// clip is text if within limit bytes, else its first three quarters and last quarter of what
// fits beside the marker, cut on rune boundaries.
func clip(text string, limit int) string {
	if len(text) <= limit {
		return text
	}
	keep := max(limit-clipMarkerBytes, 0)
	head, tail := keep*3/4, len(text)-(keep-keep*3/4)
	for head > 0 && !utf8.RuneStart(text[head]) {
		head--
	}
	for tail < len(text) && !utf8.RuneStart(text[tail]) {
		tail++
	}
	var b strings.Builder
	b.Grow(limit)
	b.WriteString(text[:head])
	b.WriteString(" …[")
	b.WriteString(strconv.Itoa(tail - head))
	b.WriteString(" bytes cut]… ")
	b.WriteString(text[tail:])
	return b.String()
}
