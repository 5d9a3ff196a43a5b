package repos

import (
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/repo"
)

// A dependency's tags and import-values are free-form in a tenant's index: the cache counts
// them (2 MiB of import-values held 178 MiB live, counted as 2 KiB).
func TestIndexCostCountsDependencyValues(t *testing.T) {
	imports := make([]any, 10_000)
	tags := make([]string, 10_000)
	for i := range imports {
		imports[i] = map[string]any{"child": "a", "parent": "b"}
		tags[i] = "t"
	}
	cv := &repo.ChartVersion{Metadata: &chart.Metadata{Name: "x", Version: "1.0.0",
		Dependencies: []*chart.Dependency{{Name: "d", ImportValues: imports, Tags: tags}}}}
	idx := &repo.IndexFile{Entries: map[string]repo.ChartVersions{"x": {cv}}}
	if got, want := indexCost(idx), int64(20_000*64); got < want {
		t.Errorf("cost %d of 10,000 import-values and 10,000 tags, want at least %d", got, want)
	}
}
