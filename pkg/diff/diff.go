package diff

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Change kinds, as helm-diff's JSON output names them.
const (
	Add    = "ADD"
	Modify = "MODIFY"
	Remove = "REMOVE"
)

// Change is one object the action adds, modifies or removes.
type Change struct {
	// API is the object's API group as helm-diff names it ("apps"; "v1" for the core API).
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
	// Context is the lines shown around each change; negative: the whole object.
	Context int
}

// Bounds of a comparison, past which a changed object is shown without its lines. The matcher's
// work (cost) grows with the product of an object's differing lines before and after (within
// their common ends); MaxTime is also what a diff adds to its caller's render slot.
const (
	MaxObjectLines = 20_000  // one object's lines
	MaxLines       = 200_000 // the lines of one comparison
	MaxObjectCost  = 2_000_000
	MaxCost        = 8_000_000
	MaxTime        = 2 * time.Second
)

// Compute compares a release's manifest (before) with an action's (after), equal objects left
// out; past ctx or MaxTime the rest show as changed, without lines; a slower parse is an error.
func Compute(ctx context.Context, before, after, namespace string, o Options) ([]Change, error) {
	deadline := time.Now().Add(MaxTime)
	named, stop := context.WithDeadline(context.WithoutCancel(ctx), deadline)
	defer stop()
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	b, err := Parse(named, before, namespace)
	if err != nil {
		return nil, fmt.Errorf("the release's manifest: %w", err)
	}
	a, err := Parse(named, after, namespace)
	if err != nil {
		return nil, fmt.Errorf("the manifest to apply: %w", err)
	}
	var out []Change
	left := budget{lines: MaxLines, cost: MaxCost, ctx: ctx}
	for _, k := range sortedKeys(b, a) {
		bo, inB := b[k]
		ao, inA := a[k]
		if inB && !inA && kept(bo) {
			continue
		}
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
		c, changed := compare(bp, ap, o, &left)
		if changed {
			out = append(out, c)
		}
	}
	return out, nil
}

// resourcePolicy is the annotation by which Helm keeps an object the release no longer has.
const resourcePolicy = "helm.sh/resource-policy"

// kept reports an object annotated helm.sh/resource-policy: keep, which Helm does not
// delete. Only a document naming the annotation is parsed, bounded as a Secret is.
func kept(o Object) bool {
	if !strings.Contains(o.Text, resourcePolicy) {
		return false
	}
	var m map[string]any // exact keys, as the apply decodes them
	if err := parseBounded(o.Text, MaxDocumentNodes, &m); err != nil {
		return false
	}
	meta, _ := m["metadata"].(map[string]any)
	annotations, _ := meta["annotations"].(map[string]any)
	return annotations[resourcePolicy] == "keep"
}

// compare diffs one object present on at least one side, its lines and cost taken from left.
func compare(b, a *Object, o Options, left *budget) (Change, bool) {
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
	c.Diff = unified(from, to, o.Context, left)
	return c, true
}

func changeOf(o Object, change string) Change {
	return Change{API: APIBase(o.API), Kind: o.Kind, Namespace: o.Namespace, Name: o.Name, Change: change}
}
