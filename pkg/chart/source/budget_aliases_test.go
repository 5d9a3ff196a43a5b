package source

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/async-helm/async-helm/internal/testcharts/hostile"
)

// aliased is a chart whose Chart.yaml lists its one subchart "s" (the given files) n times,
// under n aliases.
func aliased(t *testing.T, n int, sub ...hostile.Entry) []byte {
	t.Helper()
	var lines strings.Builder
	for i := range n {
		fmt.Fprintf(&lines, "- {name: s, version: 0.1.0, alias: a%d}\n", i)
	}
	top := "apiVersion: v2\nname: top\nversion: 0.1.0\ndependencies:\n" + lines.String()
	s := tgz(t, append([]hostile.Entry{chartYAML("s")}, sub...)...)
	return tgz(t, entry{Name: "top/Chart.yaml", Data: []byte(top)}, entry{Name: "top/charts/s-0.1.0.tgz", Data: s})
}

// Helm's ProcessDependencies makes one copy of a subchart per Chart.yaml entry that names it,
// and the executor writes every copy out (the render frame: 200 aliases of a 2 MiB subchart
// made a 666 MiB frame from a 1 KiB archive). The budget charges the processed tree: each
// alias after the first costs the subchart's whole tree again, bytes, nodes and CRD nodes.
func TestDependencyAliasesAreChargedACopyEach(t *testing.T) {
	mib := strings.Repeat("x", 1<<20)
	big := []hostile.Entry{{Name: "s/templates/cm.yaml", Data: []byte("data: " + mib + "\n")},
		{Name: "s/values.yaml", Data: []byte("v: " + mib + "\n")}}
	refusedWithin(t, aliased(t, 200, big...), "once each dependency alias is a copy of its subchart", 64<<20)
	// Nodes: a values.yaml of 20,000 nodes under 100 aliases.
	dense := []hostile.Entry{{Name: "s/values.yaml", Data: []byte("l: [" + strings.Repeat("{a: 1},", 5000) + "{}]\n")}}
	if _, err := (Budget{}).Load(aliased(t, 100, dense...)); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "YAML nodes in the files") {
		t.Errorf("a 20,000-node subchart under 100 aliases: %v, want ErrTooLarge on nodes", err)
	}
	// CRD nodes: each copy's crds/ are parsed by Helm's install.
	crd := []hostile.Entry{{Name: "s/crds/c.yaml", Data: []byte("l: [" + strings.Repeat("{a: 1},", 5000) + "{}]\n")}}
	if _, err := (Budget{MaxCRDNodes: 100_000}).Load(aliased(t, 50, crd...)); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "crds/") {
		t.Errorf("a subchart of 20,000 CRD nodes under 50 aliases: %v, want ErrTooLarge on CRD nodes", err)
	}
	// Nested: 8 aliases of a subchart that lists its own subchart 8 times is 64 copies.
	var inner, top strings.Builder
	inner.WriteString("apiVersion: v2\nname: s\nversion: 0.1.0\ndependencies:\n")
	top.WriteString("apiVersion: v2\nname: top\nversion: 0.1.0\ndependencies:\n")
	for i := range 8 {
		fmt.Fprintf(&inner, "- {name: g, version: 0.1.0, alias: g%d}\n", i)
		fmt.Fprintf(&top, "- {name: s, version: 0.1.0, alias: a%d}\n", i)
	}
	g := tgz(t, chartYAML("g"), entry{Name: "g/templates/cm.yaml", Data: []byte("data: " + mib + "\n")})
	nest := []hostile.Entry{{Name: "s/Chart.yaml", Data: []byte(inner.String())}, {Name: "s/charts/g-0.1.0.tgz", Data: g}}
	if _, err := (Budget{}).Load(tgz(t, entry{Name: "top/Chart.yaml", Data: []byte(top.String())}, entry{Name: "top/charts/s-0.1.0.tgz", Data: tgz(t, nest...)})); !errors.Is(err, ErrTooLarge) {
		t.Errorf("8 x 8 copies of a 1 MiB subchart: %v, want ErrTooLarge", err)
	}

	// A few aliases of a small subchart load, charged a copy each.
	small := []hostile.Entry{{Name: "s/values.yaml", Data: []byte("image: nginx\n")}}
	_, once, err := DefaultBudget.load(context.Background(), aliased(t, 1, small...))
	if err != nil {
		t.Fatal(err)
	}
	ch, thrice, err := DefaultBudget.load(context.Background(), aliased(t, 3, small...))
	if err != nil || len(ch.Dependencies()) != 1 {
		t.Fatalf("3 aliases of a small subchart: %v", err)
	}
	if thrice.bytes <= once.bytes || thrice.nodes <= once.nodes {
		t.Errorf("3 aliases charged %+v, 1 alias %+v: want the copies charged", thrice, once)
	}
}

// Helm's coalesce gives each subchart its own copy of the globals: 500 subcharts and a
// global table of 5,000 keys (18 KiB on the wire, within the budget's scan) coalesced to
// 155 MiB held in submit's process (1,000 x 10,000: 624 MiB). Each subchart is charged
// the globals it receives.
func TestGlobalsCopiedIntoEachSubchartAreCharged(t *testing.T) {
	if _, err := (Budget{}).Load(listing(t, "global", 500, 5000, false)); !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "copy of the globals") {
		t.Errorf("500 subcharts, 5,000 global keys: %v, want it refused for the globals' copies", err)
	}
	_, alone, err := DefaultBudget.load(context.Background(), listing(t, "global", 10, 0, false))
	if err != nil {
		t.Fatal(err)
	}
	_, with, err := DefaultBudget.load(context.Background(), listing(t, "global", 10, 100, false))
	if err != nil || with.nodes-alone.nodes < 10*200 {
		t.Errorf("10 subcharts, 100 global keys: %v, %d nodes more than without, want each subchart's copy charged (%d)", err, with.nodes-alone.nodes, 10*200)
	}
}
