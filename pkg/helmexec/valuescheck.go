package helmexec

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
)

var (
	// ErrValuesInvalid is values that do not meet a chart's schema; Helm's text follows.
	ErrValuesInvalid = errors.New("values don't meet the specifications of the schema(s) in the following chart(s)")
	// ErrValuesUnchecked is a check of values that passed its deadline or memory bound: a
	// schema whose references recurse can take time and memory exponential in the values'
	// depth, and Go cannot stop a validation in place.
	ErrValuesUnchecked = errors.New("the values could not be checked against the chart's schema")
)

// DefaultValuesLimits bound a check of values in a child (bounds.ValuesCheckTime and the rest).
var DefaultValuesLimits = RenderLimits{Timeout: bounds.ValuesCheckTime, MaxMemoryBytes: bounds.ValuesCheckMemory,
	MaxOutputBytes: bounds.ValuesCheckOutput, MaxParallel: bounds.ValuesChecksAtOnce}

// SchemaCheck is one chart's values.schema.json and the values Helm checks against it.
type SchemaCheck struct {
	Chart  string         `json:"chart"`
	Schema []byte         `json:"schema"`
	Values map[string]any `json:"values"`
	// Compiled, when set, is Schema compiled (CompileValuesSchema), for a caller that
	// keeps compiled schemas; a child compiles Schema again.
	Compiled *ValuesSchema `json:"-"`
}

// ValuesSchema is a chart's values.schema.json compiled for CheckValues.
type ValuesSchema struct {
	// schema is nil when the values are not checked: the schema refers to another
	// document, which nothing fetches (compileSchema), and Helm's check is off for it.
	schema *jsonschema.Schema
	// refs: the schema holds references, so a check may take time and memory exponential
	// in the values' depth; it runs in a child, bounded.
	refs bool
	// objects are the schema's subschemas: a check's work is at most these times the
	// values' nodes, and past bounds.InProcessCheckWork it runs in a child, bounded.
	objects int
}

// isolated says whether checking values against s runs in a child.
func (s *ValuesSchema) isolated(values map[string]any) bool {
	if s.refs {
		return true
	}
	if s.objects == 0 {
		return false
	}
	return nodesUpTo(values, bounds.InProcessCheckWork/s.objects+1) > bounds.InProcessCheckWork/s.objects
}

// nodesUpTo counts v's nodes, stopping past limit.
func nodesUpTo(v any, limit int) int {
	n := 0
	var walk func(any)
	walk = func(v any) {
		if n > limit {
			return
		}
		n++
		switch v := v.(type) {
		case map[string]any:
			for _, e := range v {
				walk(e)
			}
		case []any:
			for _, e := range v {
				walk(e)
			}
		}
	}
	walk(v)
	return n
}

// CompileValuesSchema compiles raw once for any number of CheckValues.
func CompileValuesSchema(raw []byte) (*ValuesSchema, error) {
	s, scan, err := compileSchema(raw)
	if err != nil {
		return nil, err
	}
	if scan.fetches != "" {
		return &ValuesSchema{}, nil
	}
	return &ValuesSchema{schema: s, refs: scan.refs, objects: scan.objects}, nil
}

// collectChecks lists what Helm's check (chartutil.ValidateAgainstSchema) validates for a
// chart whose dependencies are processed: each enabled chart's schema against its
// coalesced values.
func collectChecks(ch *chart.Chart, values map[string]any) []SchemaCheck {
	var out []SchemaCheck
	if ch.Schema != nil {
		out = append(out, SchemaCheck{Chart: ch.Name(), Schema: ch.Schema, Values: values})
	}
	for _, sub := range ch.Dependencies() {
		if v, ok := values[sub.Name()].(map[string]any); ok {
			out = append(out, collectChecks(sub, v)...)
		}
	}
	return out
}

// CheckValues runs checks as Helm's check would: a schema with no reference in process (its
// work is at most its size times the values'), one with a reference in a worker killed at
// r's bounds or ctx's deadline; one that would make a compiler fetch is not checked.
// Errors: ErrValuesInvalid, ErrValuesUnchecked, ErrRenderBusy.
func (r *Renderer) CheckValues(ctx context.Context, checks []SchemaCheck) error {
	var isolated []SchemaCheck
	var msgs strings.Builder
	for _, c := range checks {
		s := c.Compiled
		if s == nil {
			var err error
			if s, err = CompileValuesSchema(c.Schema); err != nil {
				fmt.Fprintf(&msgs, "%s:\n%v\n", c.Chart, err)
				continue
			}
		}
		if s.isolated(c.Values) {
			isolated = append(isolated, c)
			continue
		}
		msgs.WriteString(s.check(c.Chart, c.Values))
	}
	if len(isolated) > 0 {
		res, err := r.child(ctx, workerJob{Checks: isolated})
		switch {
		case err != nil:
			return valuesChildError(err, r.Limits.withDefaults())
		case res.Failed == workerFailedValues:
			msgs.WriteString(res.Error)
		case res.Error != "":
			return fmt.Errorf("%w: %s", ErrValuesUnchecked, res.Error)
		}
	}
	if msgs.Len() > 0 {
		return fmt.Errorf("%w:\n%s", ErrValuesInvalid, msgs.String())
	}
	return nil
}

func valuesChildError(err error, lim RenderLimits) error {
	switch {
	case errors.Is(err, ErrRenderBusy):
		return err
	case errors.Is(err, ErrRenderKilled):
		return fmt.Errorf("%w: the check did not end within %s (a schema whose references recurse?)", ErrValuesUnchecked, lim.Timeout)
	case errors.Is(err, ErrRenderMemory):
		return fmt.Errorf("%w: the check needs more than %d MiB of memory (a schema whose references recurse?)", ErrValuesUnchecked, lim.MaxMemoryBytes>>20)
	}
	return fmt.Errorf("%w: %w", ErrValuesUnchecked, err)
}

// checkOne is Helm's text for one chart's values that do not meet its schema ("" when
// they do): what a worker answers for each check it is given.
func checkOne(c SchemaCheck) string {
	s, err := CompileValuesSchema(c.Schema)
	if err != nil {
		return fmt.Sprintf("%s:\n%v\n", c.Chart, err)
	}
	return s.check(c.Chart, c.Values)
}

// check is Helm's text for values that do not meet s ("" when they do). The values go
// through JSON first, as Helm's check does.
func (s *ValuesSchema) check(chart string, values map[string]any) (msg string) {
	if s.schema == nil {
		return "" // never compiled with a loader: Helm's check is off for such a chart
	}
	defer func() {
		if r := recover(); r != nil { // as Helm's own check does
			msg = fmt.Sprintf("%s:\nunable to validate schema: %s\n", chart, r)
		}
	}()
	raw, err := json.Marshal(values)
	if err != nil {
		return fmt.Sprintf("%s:\n%v\n", chart, err)
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Sprintf("%s:\n%v\n", chart, err)
	}
	if err := s.schema.Validate(v); err != nil {
		// chartutil.JSONSchemaValidationError's text.
		return fmt.Sprintf("%s:\n%s\n", chart, strings.TrimPrefix(err.Error(), "jsonschema validation failed with '"+SchemaURL+"#'\n"))
	}
	return ""
}

// processDependencies processes ch's dependencies in place (CheckDependencies) and tells
// whether Helm's install or upgrade would check the values against schemas of the processed
// tree (not when skipSchemaValidation).
func processDependencies(ch *chart.Chart, values map[string]any) (bool, error) {
	skip, err := skipSchemaValidation(ch)
	if err != nil {
		return false, err
	}
	if err := CheckDependencies(ch, values); err != nil {
		return false, err
	}
	return !skip && hasSchema(ch), nil
}

// hasSchema says whether ch or a dependency it keeps has a schema.
func hasSchema(ch *chart.Chart) bool {
	return ch.Schema != nil || slices.ContainsFunc(ch.Dependencies(), hasSchema)
}

// upgradeValues are the values Helm's upgrade runs with: the request's, or when it has none,
// those of the release it upgrades, found as Helm finds it; with reuse, those under the
// request's (as `helm upgrade --reuse-values`). Handing them to Helm (with its own reuse
// off) makes the values checked the values run, and the record read once, against the
// request's ValuesPin.
func upgradeValues(cfg *action.Configuration, req Request) (map[string]any, error) {
	if len(req.Values) > 0 && !req.ReuseValues {
		return req.Values, nil
	}
	return reusedValues(req, lastValuesOf(cfg, req.Name))
}

// reusedValues are the request's values over current's, once current is checked against
// the pin submit took of them.
func reusedValues(req Request, current *helmrelease.Release) (map[string]any, error) {
	if req.ValuesPin != nil {
		if err := req.ValuesPin.CheckValues(current); err != nil {
			return nil, fmt.Errorf("upgrade %s/%s revision %d refused: %w", req.Namespace, req.Name, req.Revision, err)
		}
	}
	switch {
	case current == nil || len(current.Config) == 0:
		return req.Values, nil
	case len(req.Values) == 0:
		return current.Config, nil
	}
	return chartutil.CoalesceTables(req.Values, current.Config), nil
}

// lastValuesOf is the release whose values an upgrade without values reuses (nil: none).
func lastValuesOf(cfg *action.Configuration, name string) *helmrelease.Release {
	last, err := cfg.Releases.Last(name)
	if err != nil || last.Info == nil {
		return nil // Helm fails the same way
	}
	current := last
	if last.Info.Status != helmrelease.StatusDeployed {
		if current, err = cfg.Releases.Deployed(name); err != nil {
			if last.Info.Status != helmrelease.StatusFailed && last.Info.Status != helmrelease.StatusSuperseded {
				return nil
			}
			current = last
		}
	}
	return current
}
