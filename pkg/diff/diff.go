package diff

import (
	"fmt"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
)

// Change kinds, as helm-diff's JSON output names them.
const (
	Add    = "ADD"
	Modify = "MODIFY"
	Remove = "REMOVE"
)

// Change is one object the action adds, modifies or removes.
type Change struct {
	API       string `json:"api"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Change    string `json:"change"`
	// Diff is a unified diff of the object ("@@" hunks, no file header), Secrets masked.
	Diff string `json:"diff"`
}

// Key names the changed object as helm-diff does.
func (c Change) Key() string {
	return Object{API: c.API, Kind: c.Kind, Namespace: c.Namespace, Name: c.Name}.Key()
}

// Options of a comparison.
type Options struct {
	// Context is the lines shown around each change; negative: the whole object (helm-diff's
	// default).
	Context int
}

// MaxObjectLines bounds an object compared line by line; a larger one that changed is
// shown as such, without its lines (the diff's cost grows with the square of its lines).
const MaxObjectLines = 20_000

// MaxLines bounds the lines compared line by line in one comparison; the objects past it
// that changed are shown as such, without their lines.
const MaxLines = 200_000

// Compute compares the objects of two manifests of a release in namespace: what it has
// (before) and what an action would apply (after). Objects equal on both sides are left out.
func Compute(before, after, namespace string, o Options) ([]Change, error) {
	b, err := Parse(before, namespace)
	if err != nil {
		return nil, fmt.Errorf("the release's manifest: %w", err)
	}
	a, err := Parse(after, namespace)
	if err != nil {
		return nil, fmt.Errorf("the manifest to apply: %w", err)
	}
	var out []Change
	budget := MaxLines
	for _, k := range sortedKeys(b, a) {
		bo, inB := b[k]
		ao, inA := a[k]
		var bp, ap *Object
		if inB {
			bp = &bo
		}
		if inA {
			ap = &ao
		}
		if (inB && bo.Kind == "Secret") || (inA && ao.Kind == "Secret") {
			maskSecrets(bp, ap)
		}
		c, changed := compare(bp, ap, o, &budget)
		if changed {
			out = append(out, c)
		}
	}
	return out, nil
}

// compare diffs one object present on at least one side, its lines taken from budget.
func compare(b, a *Object, o Options, budget *int) (Change, bool) {
	var c Change
	var from, to string
	switch {
	case b == nil:
		c, to = changeOf(*a, Add), a.Text
	case a == nil:
		c, from = changeOf(*b, Remove), b.Text
	default:
		if b.Text == a.Text {
			return c, false
		}
		c, from, to = changeOf(*a, Modify), b.Text, a.Text
	}
	c.Diff = unified(from, to, o.Context, budget)
	return c, true
}

func changeOf(o Object, change string) Change {
	return Change{API: o.API, Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, Change: change}
}

func unified(from, to string, context int, budget *int) string {
	a, b := difflib.SplitLines(strings.TrimSuffix(from, "\n")), difflib.SplitLines(strings.TrimSuffix(to, "\n"))
	if from == "" {
		a = nil
	}
	if to == "" {
		b = nil
	}
	if len(a) > MaxObjectLines || len(b) > MaxObjectLines {
		return fmt.Sprintf("# changed: %d lines before, %d after (over %d lines: not compared line by line)\n", len(a), len(b), MaxObjectLines)
	}
	if *budget < len(a)+len(b) {
		return fmt.Sprintf("# changed: %d lines before, %d after (past %d lines in this diff: not compared line by line)\n", len(a), len(b), MaxLines)
	}
	*budget -= len(a) + len(b)
	if context < 0 {
		context = max(len(a), len(b))
	}
	text, err := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{A: a, B: b, Context: context})
	if err != nil {
		return fmt.Sprintf("# not compared: %v\n", err)
	}
	return strings.TrimPrefix(text, "--- \n+++ \n")
}
