package source

import (
	"context"
	"fmt"
	"math"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
)

// chargeAliases charges a loaded chart the processed tree Helm makes of it, which whatever
// writes it out (render frame, values checks, CRDs) writes whole: ProcessDependencies copies
// a subchart per Chart.yaml entry naming it, and coalesce gives each subchart its own
// globals. Each entry after the first is charged its subchart's tree, each subchart its
// globals (MaxBytes, MaxNodes, MaxCRDNodes), each chart its matching before it is matched
// here (entriesOf, bounds.MaxDependencyMatching).
func (b Budget) chargeAliases(ctx context.Context, ch *chart.Chart, c *charged) error {
	s := aliasScan{ctx: ctx, room: charged{bytes: b.MaxBytes - c.bytes, nodes: b.MaxNodes - c.nodes, crdNodes: b.MaxCRDNodes - c.crdNodes,
		matching: bounds.MaxDependencyMatching}, archived: map[*chart.Chart]charged{}, compatible: map[[2]string]bool{}}
	extra, over := s.extra(ch, yamlsize.Size{})
	c.bytes, c.nodes, c.crdNodes, c.matching = c.bytes+extra.bytes, c.nodes+extra.nodes, c.crdNodes+extra.crdNodes, s.total.matching
	switch {
	case !over:
		return nil
	case s.over == "ctx":
		return fmt.Errorf("match the chart's dependencies: %w", ctx.Err())
	case s.over == "matching":
		return &BudgetError{Bound: fmt.Sprintf("has more dependency matching than %d (each Chart.yaml entry against each subchart, and the versions compared)",
			bounds.MaxDependencyMatching)}
	case s.over == "bytes":
		return &BudgetError{Bound: fmt.Sprintf("unpacks to more than %s across its nested archives"+s.what, mib(b.MaxBytes))}
	case s.over == "crds":
		return &BudgetError{Bound: fmt.Sprintf("has more than %d YAML nodes in its crds/ files"+s.what, b.MaxCRDNodes)}
	}
	return &BudgetError{Bound: fmt.Sprintf("has more than %d YAML nodes in the files Helm's loader parses"+s.what, b.MaxNodes)}
}

// aliasScan adds up what the copies cost, up to the room the budget has left. over names
// the bound passed (bytes, nodes, crds, matching, or ctx), what which copies.
type aliasScan struct {
	ctx         context.Context
	room, total charged
	archived    map[*chart.Chart]charged
	compatible  map[[2]string]bool // the (constraint, version) pairs matched so far
	over, what  string
}

const (
	aliasCopies  = " once each dependency alias is a copy of its subchart"
	globalCopies = " once each subchart's copy of the globals is written out"
)

// extra is what c's processed tree costs beyond its archive, c having received globals: its
// matching, and for each subchart its globals, its own tree's extra, and k-1 copies of all
// that when k entries resolve to it.
func (s *aliasScan) extra(c *chart.Chart, received yamlsize.Size) (added charged, over bool) {
	copies, work, ok := s.entriesOf(c)
	if added.matching = work; !ok {
		return added, true
	}
	g := plus(received, s.globals(c))
	got := charged{bytes: g.Bytes, nodes: g.Nodes}
	for _, sub := range c.Dependencies() {
		if s.charge(got, 1, globalCopies) {
			return added, true
		}
		e, over := s.extra(sub, g)
		if over {
			return added, true
		}
		e = add(e, got)
		added = add(added, e)
		if k := copies[sub]; k > 1 {
			one := add(s.archive(sub), e)
			if s.charge(one, k-1, aliasCopies) {
				return added, true
			}
			added = add(added, times(one, k-1))
		}
	}
	return added, false
}

// charge adds k of one to the total, unless they pass the room left (noting what).
func (s *aliasScan) charge(one charged, k int, what string) bool {
	if s.exceeds(one, k) {
		s.what = what
		return true
	}
	s.total = add(s.total, times(one, k))
	return false
}

// globals measures c's own `global` table, which Helm copies into each of its subcharts;
// the walk stops past the room left.
func (s *aliasScan) globals(c *chart.Chart) yamlsize.Size {
	g, ok := c.Values["global"].(map[string]any)
	if !ok {
		return yamlsize.Size{}
	}
	w := sizeWalk{limit: yamlsize.Size{Bytes: s.room.bytes - s.total.bytes, Nodes: s.room.nodes - s.total.nodes}}
	w.value(g)
	return w.size
}

// exceeds tells whether k more copies of one pass the room left (and notes which bound).
func (s *aliasScan) exceeds(one charged, k int) bool {
	left := func(room, used, per int64) bool { return per > 0 && (room-used)/per < int64(k) }
	switch {
	case left(s.room.bytes, s.total.bytes, one.bytes):
		s.over = "bytes"
	case left(s.room.nodes, s.total.nodes, one.nodes):
		s.over = "nodes"
	case left(s.room.crdNodes, s.total.crdNodes, one.crdNodes):
		s.over = "crds"
	case left(s.room.matching, s.total.matching, one.matching):
		s.over = "matching"
	default:
		return false
	}
	return true
}

// entriesOf charges c's matching as Helm's processDependencyEnabled does it (each entry
// against each subchart, and the constraint's and version's bytes for one of its name),
// then counts the entries that resolve to each subchart as getAliasDependency does: the
// first of that name in a compatible version. ok is false past the bound or once ctx ends.
func (s *aliasScan) entriesOf(c *chart.Chart) (n map[*chart.Chart]int, work int64, ok bool) {
	n = map[*chart.Chart]int{}
	if c.Metadata == nil {
		return n, 0, true
	}
	named, versions := map[string][]*chart.Chart{}, map[string]int{}
	for _, sub := range c.Dependencies() {
		if sub != nil && sub.Metadata != nil {
			named[sub.Name()] = append(named[sub.Name()], sub)
			versions[sub.Name()] += len(sub.Metadata.Version)
		}
	}
	work = int64(len(c.Metadata.Dependencies)) * int64(len(c.Dependencies()))
	for _, r := range c.Metadata.Dependencies {
		if r != nil {
			work += int64(len(named[r.Name])*len(r.Version) + versions[r.Name])
		}
	}
	if s.charge(charged{matching: work}, 1, "") {
		return n, work, false
	}
	for _, r := range c.Metadata.Dependencies {
		if s.ctx.Err() != nil {
			s.over = "ctx"
			return n, work, false
		}
		if r == nil {
			continue
		}
		for _, sub := range named[r.Name] {
			if s.compatibleRange(r.Version, sub.Metadata.Version) {
				n[sub]++
				break
			}
		}
	}
	return n, work, true
}

func (s *aliasScan) compatibleRange(constraint, version string) bool {
	k := [2]string{constraint, version}
	ok, seen := s.compatible[k]
	if !seen {
		ok = chartutil.IsCompatibleRange(constraint, version)
		s.compatible[k] = ok
	}
	return ok
}

// archive is what the budget's scan charged c's tree.
func (s *aliasScan) archive(c *chart.Chart) charged {
	if a, ok := s.archived[c]; ok {
		return a
	}
	var a charged
	for _, f := range c.Raw {
		if f == nil || inSubchartDir(f.Name) {
			continue
		}
		a.bytes += int64(len(f.Name) + len(f.Data))
		if !parsedAsYAML(f.Name) && !isCRDFile(f.Name) {
			continue
		}
		// Measured within the budget by the scan already: a failure counts as over.
		size, err := yamlsize.Expanded(f.Data, s.room.bytes+int64(len(f.Data)))
		if err != nil {
			size = yamlsize.Size{Bytes: s.room.bytes + 1, Nodes: s.room.nodes + 1}
		}
		a.bytes += max(size.Bytes-int64(len(f.Data)), 0)
		if parsedAsYAML(f.Name) {
			a.nodes += size.Nodes
		} else {
			a.crdNodes += size.Nodes
		}
	}
	for _, sub := range c.Dependencies() {
		a = add(a, s.archive(sub))
	}
	s.archived[c] = a
	return a
}

// inSubchartDir: the file is one of a directory subchart's, charged in that subchart.
func inSubchartDir(name string) bool {
	parts := strings.Split(name, "/")
	return len(parts) > 2 && parts[0] == "charts"
}

func times(a charged, k int) charged {
	n := int64(k)
	return charged{bytes: a.bytes * n, files: a.files * k, nodes: a.nodes * n, crdNodes: a.crdNodes * n, schemaNodes: a.schemaNodes * n,
		matching: a.matching * n}
}

func add(a, b charged) charged {
	return charged{bytes: a.bytes + b.bytes, files: a.files + b.files, nodes: a.nodes + b.nodes, crdNodes: a.crdNodes + b.crdNodes,
		schemaNodes: a.schemaNodes + b.schemaNodes, matching: a.matching + b.matching}
}

// fanout is what Helm's processing of a chart makes of the values it is given (a subchart
// that k entries name is k copies, versions not compared): Globals, the subcharts at every
// level, each given its own copy of the global table (coalesceGlobals); Copies, the charts
// whose dependencies Helm processes (a Dependencies list, empty too), each copying the
// coalesced values whole (processDependencyEnabled).
type fanout struct {
	Globals, Copies int64
}

// fanoutOf counts c's fanout in one walk of its tree.
func fanoutOf(c *chart.Chart) fanout {
	var f fanout
	if c == nil || c.Metadata == nil {
		return f
	}
	processed := c.Metadata.Dependencies != nil
	listed := map[string]int64{}
	for _, r := range c.Metadata.Dependencies {
		if r != nil {
			listed[r.Name]++
		}
	}
	if processed {
		f.Copies = 1
	}
	for _, sub := range c.Dependencies() {
		k, s := int64(1), fanoutOf(sub)
		if processed {
			k = max(k, listed[sub.Name()])
			f.Copies = min(f.Copies+product(k, s.Copies), fanoutCap)
		}
		f.Globals = min(f.Globals+product(k, s.Globals+1), fanoutCap)
	}
	return f
}

// fanoutCap holds the counts far below overflow, whatever nested aliases multiply.
const fanoutCap = 1 << 40

// product is a*b, or fanoutCap when more.
func product(a, b int64) int64 {
	if a != 0 && b > fanoutCap/a {
		return fanoutCap
	}
	return a * b
}

// ChargeValues refuses values that Helm's processing of ch would copy into more than
// bounds.DefaultYAMLNodes (their global table's once a subchart) or, in its dependency
// processing, bounds.MaxValuesCopied (once a chart), before anything coalesces them.
func ChargeValues(ch *chart.Chart, values map[string]any) error {
	if ch == nil || len(values) == 0 {
		return nil
	}
	f := fanoutOf(ch)
	all, g := nodesUpTo(values, bounds.DefaultYAMLNodes), int64(0)
	if global, ok := values["global"].(map[string]any); ok { // Helm skips a global that is not a table
		g = nodesUpTo(global, bounds.DefaultYAMLNodes)
	}
	if all > bounds.DefaultYAMLNodes || f.Globals > 0 && g > (bounds.DefaultYAMLNodes-all)/f.Globals {
		return &BudgetError{Bound: fmt.Sprintf("would hold more than %d YAML nodes of the values: their %d, and their global table's %d once for each of its %d subcharts",
			bounds.DefaultYAMLNodes, all, g, f.Globals)}
	}
	if held := all + g*f.Globals; f.Copies > 0 && held > bounds.MaxValuesCopied/f.Copies {
		return &BudgetError{Bound: fmt.Sprintf("would copy more than %d YAML nodes of the values: their %d once for each of its %d charts whose dependencies Helm processes",
			bounds.MaxValuesCopied, held, f.Copies)}
	}
	return nil
}

// nodesUpTo counts v's YAML nodes as the budget does, stopping past limit.
func nodesUpTo(v any, limit int64) int64 {
	w := sizeWalk{limit: yamlsize.Size{Bytes: math.MaxInt64, Nodes: limit}}
	w.value(v)
	return w.size.Nodes
}

// chargeCopies charges a loaded chart its nodes (an upper bound on its values) once for each
// chart Helm's dependency processing copies them for, against bounds.MaxValuesCopied.
func chargeCopies(ch *chart.Chart, c charged) error {
	if n := fanoutOf(ch).Copies; n > 0 && c.nodes > bounds.MaxValuesCopied/n {
		return &BudgetError{Bound: fmt.Sprintf("has more than %d YAML nodes once Helm's dependency processing copies its values (%d nodes) for each of its %d charts that list dependencies",
			bounds.MaxValuesCopied, c.nodes, n)}
	}
	return nil
}
