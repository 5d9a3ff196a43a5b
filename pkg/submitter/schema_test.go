package submitter

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"

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
