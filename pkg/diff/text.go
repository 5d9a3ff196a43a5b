package diff

import (
	"fmt"
	"io"
	"math"
	"strings"
)

var verbs = map[string]string{Add: "has been added", Modify: "has changed", Remove: "has been removed"}

// WriteText prints changes as helm-diff's default output does (given whole objects' diffs):
// each object's line, then its lines within context of a change (negative: all), "..." between.
func WriteText(w io.Writer, changes []Change, context int) error {
	var b strings.Builder
	for _, c := range changes {
		fmt.Fprintf(&b, "%s %s:\n", c.Key(), verbs[c.Change])
		recs, ok := recordsOf(c.Diff)
		if !ok { // a line saying why the object is not compared line by line
			b.WriteString(c.Diff)
			if !strings.HasSuffix(c.Diff, "\n") {
				b.WriteString("\n")
			}
			continue
		}
		writeRecords(&b, recs, context)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// record is one line of an object's diff: delta ' ', '-', '+', or '.' for lines it does not hold.
type record struct {
	delta byte
	text  string
}

// recordsOf reads a unified diff's hunks as lines (ok: it has hunks), ending as helm-diff's.
func recordsOf(unified string) (recs []record, ok bool) {
	if !strings.HasPrefix(unified, "@@ ") {
		return nil, false
	}
	for i, l := range strings.Split(strings.TrimSuffix(unified, "\n"), "\n") {
		switch {
		case strings.HasPrefix(l, "@@ "):
			if i > 0 || !startsAtFirstLine(l) {
				recs = append(recs, record{delta: '.'})
			}
		case l != "":
			recs = append(recs, record{delta: l[0], text: l[1:]})
		}
	}
	return append(recs, record{delta: ' '}), true
}

// startsAtFirstLine reports a hunk header ("@@ -a,b +c,d @@") starting at both texts' first line.
func startsAtFirstLine(header string) bool {
	var a, c int
	for _, f := range strings.Fields(header) {
		start, _, _ := strings.Cut(f[min(1, len(f)):], ",")
		switch {
		case strings.HasPrefix(f, "-"):
			_, _ = fmt.Sscanf(start, "%d", &a)
		case strings.HasPrefix(f, "+"):
			_, _ = fmt.Sscanf(start, "%d", &c)
		}
	}
	return a <= 1 && c <= 1
}

// writeRecords prints recs as helm-diff's printDiffRecords does.
func writeRecords(b *strings.Builder, recs []record, context int) {
	dist := distances(recs)
	omitting := false
	for i, r := range recs {
		if r.delta == '.' || (context >= 0 && dist[i] > context) {
			if !omitting {
				b.WriteString("...\n")
				omitting = true
			}
			continue
		}
		omitting = false
		switch {
		case r.delta == '-' || r.delta == '+':
			fmt.Fprintf(b, "%c %s\n", r.delta, r.text)
		case r.text == "":
			b.WriteString("\n")
		default:
			fmt.Fprintf(b, "  %s\n", r.text)
		}
	}
}

// distances are each line's distance from the nearest change (helm-diff's calculateDistances).
func distances(recs []record) []int {
	out := make([]int, len(recs))
	change := -1
	for i, r := range recs {
		if r.delta == '-' || r.delta == '+' {
			change = i
		}
		out[i] = math.MaxInt32
		if change >= 0 {
			out[i] = i - change
		}
	}
	change = -1
	for i := len(recs) - 1; i >= 0; i-- {
		if recs[i].delta == '-' || recs[i].delta == '+' {
			change = i
		}
		if change >= 0 {
			out[i] = min(out[i], change-i)
		}
	}
	return out
}
