package source

import (
	"fmt"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/chart"

	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
)

// chargeImports charges each import-values entry its table's bytes and nodes, against
// MaxBytes and MaxNodes: Helm puts the table under the parent by reference (a few nodes a
// line), but whatever writes the values out writes every copy.
func (b Budget) chargeImports(ch *chart.Chart, c *charged) error {
	s := importScan{left: yamlsize.Size{Bytes: b.MaxBytes - c.bytes, Nodes: b.MaxNodes - c.nodes}}
	_, over := s.chart(ch)
	c.bytes += s.total.Bytes
	c.nodes += s.total.Nodes
	switch {
	case over && c.bytes > b.MaxBytes:
		return &BudgetError{Bound: fmt.Sprintf("unpacks to more than %s across its nested archives once its import-values are written out", mib(b.MaxBytes))}
	case over:
		return &BudgetError{Bound: fmt.Sprintf("has more than %d YAML nodes in the files Helm's loader parses once its import-values are written out", b.MaxNodes)}
	}
	return nil
}

// importScan adds up the tables import-values copy, up to what the budget has left.
type importScan struct {
	left, total yamlsize.Size
}

// chart charges the imports of c and its subcharts and returns what they add to c's values
// (an upper bound): an entry's table in the subchart's values, in c's values for it (Helm
// coalesces the two), and the subchart's own imports. over: past what was left.
func (s *importScan) chart(c *chart.Chart) (added yamlsize.Size, over bool) {
	grown := map[*chart.Chart]yamlsize.Size{}
	for _, sub := range c.Dependencies() {
		n, over := s.chart(sub)
		if over {
			return added, true
		}
		grown[sub] = n
	}
	if c.Metadata == nil {
		return added, false
	}
	for _, r := range c.Metadata.Dependencies {
		if r == nil {
			continue
		}
		for _, iv := range r.ImportValues {
			child, ok := importedTable(iv)
			if !ok {
				continue
			}
			n := s.table(c.Values, r.Name+"."+child)
			if r.Alias != "" {
				n = plus(n, s.table(c.Values, r.Alias+"."+child))
			}
			for _, sub := range c.Dependencies() {
				if sub.Name() == r.Name {
					n = plus(n, plus(s.table(sub.Values, child), grown[sub]))
				}
			}
			added = plus(added, n)
			if s.total = plus(s.total, n); s.total.Bytes > s.left.Bytes || s.total.Nodes > s.left.Nodes {
				return added, true
			}
		}
	}
	return added, false
}

// importedTable is the child table an import-values entry names: a map's "child", or a
// string's "exports.<string>".
func importedTable(iv any) (string, bool) {
	switch iv := iv.(type) {
	case map[string]any:
		return fmt.Sprintf("%v", iv["child"]), true
	case string:
		return "exports." + iv, true
	}
	return "", false
}

// table measures the table at a dotted path of values; the walk stops past what is left.
func (s *importScan) table(values map[string]any, dotted string) yamlsize.Size {
	var v any = values
	for _, k := range strings.Split(dotted, ".") {
		m, ok := v.(map[string]any)
		if !ok {
			return yamlsize.Size{}
		}
		if v, ok = m[k]; !ok {
			return yamlsize.Size{}
		}
	}
	if _, ok := v.(map[string]any); !ok { // Helm imports tables only
		return yamlsize.Size{}
	}
	w := sizeWalk{limit: yamlsize.Size{Bytes: s.left.Bytes - s.total.Bytes, Nodes: s.left.Nodes - s.total.Nodes}}
	w.value(v)
	return w.size
}

// sizeWalk measures a parsed value as yamlsize does its JSON form.
type sizeWalk struct {
	limit, size yamlsize.Size
}

func (w *sizeWalk) value(v any) {
	if w.size.Bytes > w.limit.Bytes || w.size.Nodes > w.limit.Nodes {
		return
	}
	w.size.Nodes++
	switch v := v.(type) {
	case map[string]any:
		w.size.Bytes += 2
		for k, e := range v {
			w.size.Nodes++
			w.size.Bytes += int64(len(k)) + 4
			w.value(e)
		}
	case []any:
		w.size.Bytes += 2
		for _, e := range v {
			w.size.Bytes++
			w.value(e)
		}
	case string:
		w.size.Bytes += int64(len(v)) + 2
	case nil:
		w.size.Bytes += 4
	default: // numbers and booleans
		w.size.Bytes += int64(len(strconv.Quote(fmt.Sprint(v))))
	}
}

func plus(a, b yamlsize.Size) yamlsize.Size {
	return yamlsize.Size{Bytes: a.Bytes + b.Bytes, Nodes: a.Nodes + b.Nodes}
}
