package source

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
)

// importer is a chart whose Chart.yaml imports the child table "big" of its subchart "s"
// under n parent keys (the map form) or, with exports, n times as "data" (the string form:
// the child's exports.data merged at the parent's root).
func importer(t *testing.T, n int, subValues string, exports bool) []byte {
	t.Helper()
	var lines strings.Builder
	for i := range n {
		if exports {
			lines.WriteString("  - data\n")
		} else {
			fmt.Fprintf(&lines, "  - {child: big, parent: a%d}\n", i)
		}
	}
	top := "apiVersion: v2\nname: top\nversion: 0.1.0\ndependencies:\n- name: s\n  version: 0.1.0\n  import-values:\n" + lines.String()
	sub := tgz(t, chartYAML("s"), entry{Name: "s/values.yaml", Data: []byte(subValues)})
	return tgz(t, entry{Name: "top/Chart.yaml", Data: []byte(top)}, entry{Name: "top/charts/s-0.1.0.tgz", Data: sub})
}

// Helm's import-values put the child table under each parent key by reference: a Chart.yaml
// naming one table N times makes the processed chart hold it N times, and the executor
// writes every copy out (the render worker's frame, the release record); 200 lines of one
// 1 MiB table grew it by 711 MiB. Each import-values entry is charged the bytes and nodes
// of the table it names, against MaxBytes and MaxNodes.
func TestImportValuesAreChargedTheTablesTheyName(t *testing.T) {
	mib := "big: {s: " + strings.Repeat("x", 1<<20) + "}\nexports: {data: {s: " + strings.Repeat("y", 1<<20) + "}}\n"
	refusedWithin(t, importer(t, 100, mib, false), "once its import-values are written out", 64<<20)
	if _, err := (Budget{}).Load(importer(t, 100, mib, true)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("100 string-form imports of a 1 MiB exports table: %v, want ErrTooLarge", err)
	}
	// Nodes: a table of 2,000 small maps imported 100 times is 200,000 nodes.
	dense := "big: {l: [" + strings.Repeat("{a: 1},", 2000) + "{}]}\n"
	if _, err := (Budget{}).Load(importer(t, 100, dense, false)); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a 2,000-map table imported 100 times: %v, want ErrTooLarge", err)
	}
	// A subchart whose own imports grow the table its parent imports is charged those too.
	inner := "apiVersion: v2\nname: s\nversion: 0.1.0\ndependencies:\n- name: g\n  version: 0.1.0\n  import-values:\n" +
		strings.Repeat("  - {child: big, parent: big.c}\n", 1) + strings.Repeat("  - {child: big, parent: big.d}\n", 1)
	g := tgz(t, chartYAML("g"), entry{Name: "g/values.yaml", Data: []byte("big: {s: " + strings.Repeat("z", 4<<20) + "}\n")})
	s := tgz(t, entry{Name: "s/Chart.yaml", Data: []byte(inner)}, entry{Name: "s/values.yaml", Data: []byte("big: {}\n")},
		entry{Name: "s/charts/g-0.1.0.tgz", Data: g})
	top := "apiVersion: v2\nname: top\nversion: 0.1.0\ndependencies:\n- name: s\n  version: 0.1.0\n  import-values:\n" +
		strings.Repeat("  - {child: big, parent: x}\n", 8)
	if _, err := (Budget{}).Load(tgz(t, entry{Name: "top/Chart.yaml", Data: []byte(top)}, entry{Name: "top/charts/s-0.1.0.tgz", Data: s})); !errors.Is(err, ErrTooLarge) {
		t.Errorf("8 imports of a table grown by its own chart's imports of 2 x 4 MiB: %v, want ErrTooLarge", err)
	}

	// A few imports of small tables load.
	ch, err := (Budget{}).Load(importer(t, 3, "big: {image: nginx}\nexports: {data: {port: 80}}\n", false))
	if err != nil || len(ch.Dependencies()) != 1 {
		t.Fatalf("3 imports of a small table: %v", err)
	}
	gitlab, err := os.ReadFile(filepath.Join("..", "..", "..", "testdata", "charts", "gitlab-6.5.4.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	_, c, err := DefaultBudget.load(context.Background(), gitlab)
	t.Logf("GitLab 6.5.4: %d bytes, %d nodes, %d CRD nodes charged with its imports, dependency matching %d of %d: %v",
		c.bytes, c.nodes, c.crdNodes, c.matching, bounds.MaxDependencyMatching, err)
	if err != nil || c.matching == 0 || c.matching > bounds.MaxDependencyMatching/64 {
		t.Errorf("GitLab 6.5.4: %v, dependency matching %d; want it loaded, well within %d", err, c.matching, bounds.MaxDependencyMatching)
	}
}
