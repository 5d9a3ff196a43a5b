package source

import (
	"fmt"
	"math"

	"helm.sh/helm/v3/pkg/chart"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
)

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
