package submitter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/util/cache"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/helmexec"
)

// Schemas keeps the compiled values schema of each chart by its digest (compiling was a
// quarter of submit's CPU per request); large, the few that can hold several MiB compiled
// (bounds.SmallSchemaNodes); checker runs the checks (helmexec.Renderer.CheckValues).
type Schemas struct {
	compiled, large *cache.LRUExpireCache
	checker         *helmexec.Renderer
}

// NewSchemas keeps up to size schemas (bounds.LargeSchemasKept large ones), LRU.
func NewSchemas(size int) *Schemas {
	return &Schemas{compiled: cache.NewLRUExpireCache(size), large: cache.NewLRUExpireCache(bounds.LargeSchemasKept),
		checker: &helmexec.Renderer{Limits: helmexec.DefaultValuesLimits}}
}

// schemaTTL bounds how long an unused entry is held (a digest's schema never changes).
const schemaTTL = time.Hour

// get compiles the chart's schema once per digest ("": not kept).
func (s *Schemas) get(digest string, raw []byte) (*helmexec.ValuesSchema, error) {
	keep := s != nil && digest != ""
	if keep {
		for _, kept := range []*cache.LRUExpireCache{s.compiled, s.large} {
			if v, ok := kept.Get(digest); ok {
				return v.(*helmexec.ValuesSchema), nil
			}
		}
	}
	c, err := helmexec.CompileValuesSchema(raw)
	if err != nil || !keep {
		return c, err
	}
	if chartsource.SchemaNodes(raw) > bounds.SmallSchemaNodes || len(raw) > bounds.SmallSchemaBytes {
		s.large.Add(digest, c, schemaTTL)
	} else {
		s.compiled.Add(digest, c, schemaTTL)
	}
	return c, nil
}

// validateValues refuses values that Helm's processing of the chart would copy past its
// bounds (chartsource.ChargeValues), then checks them, merged over the chart's defaults,
// against its values.schema.json with the executor's check, in Helm's words.
func (s *Schemas) validateValues(ctx context.Context, ch *chart.Chart, digest string, values map[string]any) error {
	if err := chartsource.ChargeValues(ch, values); err != nil {
		return err
	}
	if ch == nil || len(ch.Schema) == 0 {
		return nil
	}
	merged, err := chartutil.CoalesceValues(ch, values)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrValues, err)
	}
	compiled, err := s.get(digest, ch.Schema)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrValues, err)
	}
	r := &helmexec.Renderer{Limits: helmexec.DefaultValuesLimits}
	if s != nil && s.checker != nil {
		r = s.checker
	}
	err = r.CheckValues(ctx, []helmexec.SchemaCheck{{Chart: ch.Name(), Schema: ch.Schema, Values: merged.AsMap(), Compiled: compiled}})
	switch {
	case err == nil, errors.Is(err, helmexec.ErrRenderBusy):
		return err
	case errors.Is(err, helmexec.ErrValuesInvalid):
		// Helm's text for the one chart checked, without the list's head.
		msg := strings.TrimPrefix(strings.TrimPrefix(err.Error(), helmexec.ErrValuesInvalid.Error()+":\n"), ch.Name()+":\n")
		return fmt.Errorf("%w: %s", ErrValues, msg)
	}
	return fmt.Errorf("%w: %w", ErrValues, err)
}
