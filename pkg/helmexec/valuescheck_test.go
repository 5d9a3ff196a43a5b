package helmexec

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
)

// recursiveSchema's two branches both follow a key down: values nested d deep that fail
// at the bottom cost 2^d checks (and their errors), which Go cannot stop in place.
const recursiveSchema = `{"$defs":{"n":{"anyOf":[{"type":"object","properties":{"a":{"$ref":"#/$defs/n"}}},` +
	`{"type":"object","additionalProperties":{"$ref":"#/$defs/n"}}]}},"$ref":"#/$defs/n"}`

// nested is {"a": {"a": ... "x"}}, depth deep.
func nested(depth int) map[string]any {
	var v any = "x"
	for range depth {
		v = map[string]any{"a": v}
	}
	return v.(map[string]any)
}

// The executor's install checks values against a recursive schema in the tenant's render
// worker, bounded in time and memory, not in Helm's own unbounded check in the executor's
// process.
func TestInstallChecksValuesWithinBounds(t *testing.T) {
	pool := &RenderPool{Limits: RenderLimits{Timeout: 30 * time.Second, MaxMemoryBytes: 128 << 20}}
	f, mem, opts := offlineOn(t, WithRenderWorkers(pool))
	reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
	ch := tiny("1.0.0")
	ch.Values = nil
	ch.Schema = []byte(recursiveSchema)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: ch, Values: nested(17)}, opts...)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrValuesUnchecked) {
		t.Errorf("install: %v, want %v", err, ErrValuesUnchecked)
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("the executor's process allocated %d MiB checking the values", grew>>20)
	}
}

// Values that break a schema fail as Helm's check words it, in process (no reference) or
// in the child (a reference); values that meet it pass.
func TestCheckValuesAnswersAsHelm(t *testing.T) {
	r := &Renderer{}
	for name, schema := range map[string]string{
		"in process": `{"properties": {"v": {"type": "integer"}}}`,
		"in a child": `{"$defs": {"i": {"type": "integer"}}, "properties": {"v": {"$ref": "#/$defs/i"}}}`,
	} {
		compiled, err := CompileValuesSchema([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		// Compiled by CheckValues, and compiled beforehand (submit's cache).
		for _, kept := range []*ValuesSchema{nil, compiled} {
			err := r.CheckValues(t.Context(), []SchemaCheck{{Chart: "tiny", Schema: []byte(schema), Values: map[string]any{"v": "x"}, Compiled: kept}})
			if !errors.Is(err, ErrValuesInvalid) || !strings.Contains(err.Error(), "tiny:\n") || !strings.Contains(err.Error(), "/v") {
				t.Errorf("%s (compiled beforehand: %t): %v", name, kept != nil, err)
			}
			if err := r.CheckValues(t.Context(), []SchemaCheck{{Chart: "tiny", Schema: []byte(schema), Values: map[string]any{"v": 1}, Compiled: kept}}); err != nil {
				t.Errorf("%s (compiled beforehand: %t), valid values: %v", name, kept != nil, err)
			}
		}
	}
}

// A check in a child ends with its caller's context: submit's request gone or past its
// deadline stops the child, whatever is left of the check's own bound.
func TestCheckValuesEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	r := &Renderer{Limits: RenderLimits{Timeout: time.Hour, MaxMemoryBytes: 128 << 20}, started: func(int) { cancel() }}
	err := r.CheckValues(ctx, []SchemaCheck{{Chart: "deep", Schema: []byte(recursiveSchema), Values: nested(17)}})
	if !errors.Is(err, ErrValuesUnchecked) || !errors.Is(err, context.Canceled) {
		t.Errorf("check: %v, want %v wrapping %v", err, ErrValuesUnchecked, context.Canceled)
	}
}

// An upgrade without values runs with, and checks, the values of the release it upgrades
// (Helm's own fallback).
func TestUpgradeWithoutValuesChecksTheDeployedOnes(t *testing.T) {
	f, mem, opts := offline(t)
	ch := tiny("1.0.0")
	ch.Schema = []byte(`{"properties": {"v": {"type": "string", "maxLength": 4}}}`)
	reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
	if _, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: ch,
		Values: map[string]any{"v": "mine"}}, opts...); err != nil {
		t.Fatal(err)
	}
	deployed := get(t, mem, "web", 1)
	deployed.Config = map[string]any{"v": "longer than four"} // rewritten by a tenant
	if err := mem.Update("sh.helm.release.v1.web.v1", deployed); err != nil {
		t.Fatal(err)
	}
	reserve(t, mem, "web", 2, helmrelease.StatusPendingUpgrade)
	_, err := f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2, Chart: ch}, opts...)
	if !errors.Is(err, ErrValuesInvalid) {
		t.Errorf("upgrade: %v, want %v", err, ErrValuesInvalid)
	}
}

// The executor processes an install's or upgrade's dependencies in its own process, where
// Helm's coalesce gives every subchart a copy of the values' global table: 10,000 request
// globals over 4,000 subcharts took the executor to 2,858 MiB (its limit is 2 Gi). Such
// values are refused before anything copies them; a missing dependency is refused there too.
func TestDependenciesAreProcessedWithinTheChartsBounds(t *testing.T) {
	globals := map[string]any{}
	for i := range 3000 {
		globals[fmt.Sprintf("k%d", i)] = 1
	}
	top := tiny("1.0.0")
	top.Metadata.Dependencies = []*chart.Dependency{{Name: "s0", Version: "1.0.0"}}
	for j := range 300 {
		top.AddDependency(&chart.Chart{Metadata: &chart.Metadata{Name: fmt.Sprintf("s%d", j), Version: "1.0.0", APIVersion: "v2"}})
	}
	var err error
	n := allocated(func() { _, err = processDependencies(top, map[string]any{"global": globals}) })
	t.Logf("300 subcharts, 3,000 request globals: %v; %d MiB allocated", err, n>>20)
	if !errors.Is(err, chartsource.ErrTooLarge) || !strings.Contains(err.Error(), "global table") || n > 16<<20 {
		t.Errorf("300 subcharts, 3,000 request globals: %v, %d MiB allocated; want refused before anything copies them", err, n>>20)
	}
	missing := tiny("1.0.0")
	missing.Metadata.Dependencies = []*chart.Dependency{{Name: "redis", Version: "1.x", Repository: "https://x"}}
	if _, err := processDependencies(missing, nil); !errors.Is(err, ErrMissingDependency) {
		t.Errorf("an enabled dependency missing: %v", err)
	}
}
