package submitter

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/helmexec"
)

// A schema of two recursive anyOf branches costs 2^d checks for values d deep: submit
// checks such a schema in a child bounded in time and memory and answers a clear 422, it
// does not run the check in its own process.
func TestRecursiveSchemaIsCheckedWithinBounds(t *testing.T) {
	schema := `{"$defs":{"n":{"anyOf":[{"type":"object","properties":{"a":{"$ref":"#/$defs/n"}}},` +
		`{"type":"object","additionalProperties":{"$ref":"#/$defs/n"}}]}},"$ref":"#/$defs/n"}`
	var v any = "x"
	for range 17 {
		v = map[string]any{"a": v}
	}
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "deep", Version: "1.0.0", APIVersion: "v2"}, Schema: []byte(schema)}
	s := NewSchemas(8)
	s.checker = &helmexec.Renderer{Limits: helmexec.RenderLimits{Timeout: 30 * time.Second, MaxMemoryBytes: 128 << 20}}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := s.validateValues(t.Context(), ch, "sha256:deep", v.(map[string]any))
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrValues) || !strings.Contains(err.Error(), "could not be checked") {
		t.Errorf("validate: %v, want %v: ... could not be checked", err, ErrValues)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("submit's process allocated %d MiB checking the values", grew>>20)
	}
	// The same schema with values that meet it, and values that break it near the top.
	if err := s.validateValues(t.Context(), ch, "sha256:deep", map[string]any{"a": map[string]any{}}); err != nil {
		t.Errorf("valid values: %v", err)
	}
	err = s.validateValues(t.Context(), ch, "sha256:deep", map[string]any{"a": "x"})
	if !errors.Is(err, ErrValues) || strings.Contains(err.Error(), "could not be checked") || strings.Contains(err.Error(), "deep:") {
		t.Errorf("invalid values: %v, want Helm's wording", err)
	}
}

// Submit's check of values ends at its request's deadline, not only at the check's own
// bound: a request past its deadline is answered without running the check.
func TestSchemaCheckKeepsTheRequestsDeadline(t *testing.T) {
	schema := `{"$defs":{"n":{"anyOf":[{"type":"object","properties":{"a":{"$ref":"#/$defs/n"}}},` +
		`{"type":"object","additionalProperties":{"$ref":"#/$defs/n"}}]}},"$ref":"#/$defs/n"}`
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "deep", Version: "1.0.0", APIVersion: "v2"}, Schema: []byte(schema)}
	s := NewSchemas(8)
	s.checker = &helmexec.Renderer{Limits: helmexec.RenderLimits{Timeout: 30 * time.Second, MaxMemoryBytes: 128 << 20}}
	ctx, cancel := context.WithDeadline(t.Context(), time.Unix(0, 0))
	defer cancel()
	err := s.validateValues(ctx, ch, "sha256:deep", map[string]any{"a": "x"})
	if !errors.Is(err, ErrValues) || !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("validate past the request's deadline: %v, want %v wrapping %v", err, ErrValues, context.DeadlineExceeded)
	}
}

// globalsOver is a chart of subs subcharts (one Chart.yaml entry), with schema if any, and
// values whose global table has keys keys.
func globalsOver(subs, keys int, schema []byte) (*chart.Chart, map[string]any) {
	top := &chart.Chart{Metadata: &chart.Metadata{Name: "top", Version: "0.1.0", APIVersion: "v2",
		Dependencies: []*chart.Dependency{{Name: "s0", Version: "1.0.0"}}}, Schema: schema}
	for j := range subs {
		top.AddDependency(&chart.Chart{Metadata: &chart.Metadata{Name: fmt.Sprintf("s%d", j), Version: "1.0.0", APIVersion: "v2"}})
	}
	global := map[string]any{}
	for i := range keys {
		global[fmt.Sprintf("k%d", i)] = 1
	}
	return top, map[string]any{"global": global}
}

// A request's global values are copied into every subchart by Helm's coalesce: 10,000 keys
// over a 10 KiB chart of 1,000 subcharts took submit to 960 MiB (its limit is 512 Mi), and
// accepted without a schema, the executor past its 2 Gi. Submit refuses such values (422)
// before anything coalesces them, whether the chart has a schema or not.
func TestRequestGlobalsCopiedIntoEverySubchartAreRefused(t *testing.T) {
	for _, schema := range [][]byte{nil, []byte(`{"type": "object"}`)} {
		ch, values := globalsOver(100, 2000, schema)
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		err := NewSchemas(8).validateValues(t.Context(), ch, "sha256:g", values)
		runtime.ReadMemStats(&m1)
		t.Logf("schema %q, 100 subcharts, 2,000 global keys: %v; %d MiB allocated", schema, err, (m1.TotalAlloc-m0.TotalAlloc)>>20)
		if !errors.Is(err, chartsource.ErrTooLarge) || !strings.Contains(err.Error(), "global table") {
			t.Errorf("schema %q: %v, want the values refused for their global table's copies", schema, err)
		}
	}
}
