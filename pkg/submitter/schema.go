package submitter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/util/cache"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/helmexec"
)

// Schemas keeps the compiled values schema of each chart, by the chart's digest: compiling
// it was a quarter of submit's CPU per request (make bench), and a chart's schema never
// changes under its digest.
type Schemas struct {
	compiled *cache.LRUExpireCache
	// large keeps the few schemas of more than smallSchema subschemas or smallSchemaBytes:
	// each can hold several MiB compiled (20,000 subschemas, the budget's bound, ~8 MiB; a
	// pattern compiled holds ~46 bytes a byte), so 256 of them would be gigabytes.
	large *cache.LRUExpireCache
	// isolated checks values against a schema with references in a child process, killed
	// at its deadline or memory bound (helmexec.Renderer.CheckValues).
	isolated *helmexec.Renderer
}

const (
	smallSchema      = 1000
	smallSchemaBytes = 16 << 10
	largeSchemas     = 4
)

// NewSchemas keeps the schemas of up to size charts (and of largeSchemas with large ones),
// least recently used first out.
func NewSchemas(size int) *Schemas {
	return &Schemas{compiled: cache.NewLRUExpireCache(size), large: cache.NewLRUExpireCache(largeSchemas),
		isolated: &helmexec.Renderer{Limits: helmexec.DefaultValuesLimits}}
}

// schemaTTL only bounds how long an unused entry's memory is held; a digest's schema is
// the same forever.
const schemaTTL = time.Hour

// compiledSchema is a chart's schema compiled, or nil when it cannot be checked here.
// refs: the schema holds references, so a check may take time and memory exponential in
// the values' depth: it runs in a child, bounded.
type compiledSchema struct {
	schema *jsonschema.Schema
	refs   bool
}

func compileSchema(raw []byte) (*compiledSchema, error) {
	s, ref, err := helmexec.CompileSchema(raw)
	if err != nil {
		return nil, err
	}
	if ref != "" {
		// It is not checked here, nor by Helm in the executor: nothing fetches what a chart
		// names (helmexec.CompileSchema).
		return &compiledSchema{}, nil
	}
	return &compiledSchema{schema: s, refs: helmexec.SchemaHasRefs(raw)}, nil
}

// get compiles the chart's schema once per digest ("" digest: not kept). A request finds it
// in either cache without reading the schema again; only a compile decides where it goes.
func (s *Schemas) get(digest string, raw []byte) (*compiledSchema, error) {
	keep := s != nil && digest != ""
	if keep {
		for _, kept := range []*cache.LRUExpireCache{s.compiled, s.large} {
			if v, ok := kept.Get(digest); ok {
				return v.(*compiledSchema), nil
			}
		}
	}
	c, err := compileSchema(raw)
	if err != nil || !keep {
		return c, err
	}
	if chartsource.SchemaNodes(raw) > smallSchema || len(raw) > smallSchemaBytes {
		s.large.Add(digest, c, schemaTTL)
	} else {
		s.compiled.Add(digest, c, schemaTTL)
	}
	return c, nil
}

// validateValues checks the user's values, merged over the chart's defaults, against the
// chart's values.schema.json, as Helm will before rendering, with Helm's wording.
func (s *Schemas) validateValues(ch *chart.Chart, digest string, values map[string]any) (reterr error) {
	if ch == nil || len(ch.Schema) == 0 {
		return nil
	}
	defer func() {
		if r := recover(); r != nil { // as Helm's own check does
			reterr = fmt.Errorf("%w: unable to validate schema: %s", ErrValues, r)
		}
	}()
	merged, err := chartutil.CoalesceValues(ch, values)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrValues, err)
	}
	c, err := s.get(digest, ch.Schema)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrValues, err)
	}
	if c.schema == nil {
		return nil
	}
	if c.refs {
		return s.validateIsolated(ch, merged)
	}
	if err := c.schema.Validate(merged.AsMap()); err != nil {
		// chartutil.JSONSchemaValidationError's text.
		msg := strings.TrimPrefix(err.Error(), "jsonschema validation failed with '"+helmexec.SchemaURL+"#'\n")
		return fmt.Errorf("%w: %s\n", ErrValues, msg)
	}
	return nil
}

// validateIsolated checks merged against the chart's schema in a child, within its deadline
// and memory bound; the child's own deadline bounds the wait.
func (s *Schemas) validateIsolated(ch *chart.Chart, merged chartutil.Values) error {
	r := &helmexec.Renderer{Limits: helmexec.DefaultValuesLimits}
	if s != nil && s.isolated != nil {
		r = s.isolated
	}
	err := r.CheckValues(context.Background(), []helmexec.SchemaCheck{{Chart: ch.Name(), Schema: ch.Schema, Values: merged.AsMap()}})
	if errors.Is(err, helmexec.ErrValuesInvalid) {
		// Helm's wording, as the in-process check answers.
		msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), helmexec.ErrValuesInvalid.Error()+":\n"), ch.Name()+":\n")
		return fmt.Errorf("%w: %s", ErrValues, msg)
	}
	if errors.Is(err, helmexec.ErrRenderBusy) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrValues, err)
	}
	return nil
}
