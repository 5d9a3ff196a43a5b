package diff

import (
	"context"
	"fmt"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// budget is what is left of a comparison's bounds.
type budget struct {
	lines, cost int
	ctx         context.Context
}

// unified is the unified diff of two texts of an object with context lines around each
// change (negative: all), or a line saying why it is not shown (the bounds of diff.go).
func unified(from, to string, context int, left *budget) string {
	a, b := linesOf(from), linesOf(to)
	if len(a) > MaxObjectLines || len(b) > MaxObjectLines {
		return fmt.Sprintf("# changed: %d lines before, %d after (over %d lines: not compared line by line)\n", len(a), len(b), MaxObjectLines)
	}
	if left.lines < len(a)+len(b) {
		return fmt.Sprintf("# changed: %d lines before, %d after (past %d lines in this diff: not compared line by line)\n", len(a), len(b), MaxLines)
	}
	if err := left.ctx.Err(); err != nil {
		return fmt.Sprintf("# changed: %d lines before, %d after (past the diff's time bound: not compared line by line)\n", len(a), len(b))
	}
	pre, suf := commonEnds(a, b)
	cost := (len(a) - pre - suf) * (len(b) - pre - suf)
	switch {
	case cost > MaxObjectCost:
		return fmt.Sprintf("# changed: %d lines before, %d after (too different to compare line by line: %d by %d lines differ)\n", len(a), len(b), len(a)-pre-suf, len(b)-pre-suf)
	case cost > left.cost:
		return fmt.Sprintf("# changed: %d lines before, %d after (past the cost bound of this diff: not compared line by line)\n", len(a), len(b))
	}
	left.lines -= len(a) + len(b)
	left.cost -= cost
	if context < 0 {
		context = max(len(a), len(b))
	}
	return hunks(a, b, opCodes(a, b, pre, suf), context)
}

func linesOf(text string) []string {
	if text == "" {
		return nil
	}
	return difflib.SplitLines(strings.TrimSuffix(text, "\n"))
}

// commonEnds are the numbers of lines a and b share at their start and then at their end.
func commonEnds(a, b []string) (pre, suf int) {
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	return pre, suf
}

// opCodes are the edits from a to b: their common ends kept, the lines between matched.
func opCodes(a, b []string, pre, suf int) []difflib.OpCode {
	var out []difflib.OpCode
	if pre > 0 {
		out = append(out, difflib.OpCode{Tag: 'e', I1: 0, I2: pre, J1: 0, J2: pre})
	}
	for _, c := range difflib.NewMatcher(a[pre:len(a)-suf], b[pre:len(b)-suf]).GetOpCodes() {
		out = append(out, difflib.OpCode{Tag: c.Tag, I1: c.I1 + pre, I2: c.I2 + pre, J1: c.J1 + pre, J2: c.J2 + pre})
	}
	if suf > 0 {
		out = append(out, difflib.OpCode{Tag: 'e', I1: len(a) - suf, I2: len(a), J1: len(b) - suf, J2: len(b)})
	}
	return out
}

// hunks writes codes as unified diff hunks with n lines of context, as difflib does.
func hunks(a, b []string, codes []difflib.OpCode, n int) string {
	var w strings.Builder
	for _, g := range grouped(codes, n) {
		first, last := g[0], g[len(g)-1]
		fmt.Fprintf(&w, "@@ -%s +%s @@\n", lineRange(first.I1, last.I2), lineRange(first.J1, last.J2))
		for _, c := range g {
			if c.Tag == 'e' {
				writeLines(&w, " ", a[c.I1:c.I2])
				continue
			}
			if c.Tag == 'r' || c.Tag == 'd' {
				writeLines(&w, "-", a[c.I1:c.I2])
			}
			if c.Tag == 'r' || c.Tag == 'i' {
				writeLines(&w, "+", b[c.J1:c.J2])
			}
		}
	}
	return w.String()
}

func writeLines(w *strings.Builder, prefix string, lines []string) {
	for _, l := range lines {
		w.WriteString(prefix + l)
	}
}

// grouped splits codes into hunks with n lines of context, as difflib's GetGroupedOpCodes.
func grouped(codes []difflib.OpCode, n int) [][]difflib.OpCode {
	if len(codes) == 0 {
		return nil
	}
	codes = append([]difflib.OpCode(nil), codes...)
	if c := codes[0]; c.Tag == 'e' {
		codes[0] = difflib.OpCode{Tag: 'e', I1: max(c.I1, c.I2-n), I2: c.I2, J1: max(c.J1, c.J2-n), J2: c.J2}
	}
	if c := codes[len(codes)-1]; c.Tag == 'e' {
		codes[len(codes)-1] = difflib.OpCode{Tag: 'e', I1: c.I1, I2: min(c.I2, c.I1+n), J1: c.J1, J2: min(c.J2, c.J1+n)}
	}
	var groups [][]difflib.OpCode
	var group []difflib.OpCode
	for _, c := range codes {
		if c.Tag == 'e' && c.I2-c.I1 > 2*n {
			group = append(group, difflib.OpCode{Tag: 'e', I1: c.I1, I2: min(c.I2, c.I1+n), J1: c.J1, J2: min(c.J2, c.J1+n)})
			groups = append(groups, group)
			group = nil
			c.I1, c.J1 = max(c.I1, c.I2-n), max(c.J1, c.J2-n)
		}
		group = append(group, c)
	}
	if len(group) > 0 && !(len(group) == 1 && group[0].Tag == 'e') {
		groups = append(groups, group)
	}
	return groups
}

// lineRange is a hunk's range of lines [start, stop) as unified diffs write it.
func lineRange(start, stop int) string {
	if stop-start == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	if stop == start {
		return fmt.Sprintf("%d,0", start)
	}
	return fmt.Sprintf("%d,%d", start+1, stop-start)
}
