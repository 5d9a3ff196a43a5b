package submitter

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/util/cache"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/chart/bounds"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/valuesfrom"
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

// requestValues are what a request's values resolve to: the references the event carries,
// whether the last release's values go under them, and what submit checks (never sent).
type requestValues struct {
	refs    []valuesfrom.Ref
	reuse   bool
	checked map[string]any
}

// resolveValues reads the request's values_from after an access review per object (403,
// nothing read); an upgrade that reuses values, or names none, takes its base's references.
func (s *Service) resolveValues(ctx context.Context, action release.Action, req api.ReleaseRequest, base *helmrelease.Release, user *auth.User) (requestValues, error) {
	out := requestValues{refs: req.ValuesFrom, reuse: req.ReuseValues, checked: req.Values}
	if action == release.ActionUpgrade && base != nil && len(out.refs) == 0 && (req.ReuseValues || len(req.Values) == 0) {
		recorded, err := release.RecordedValuesFrom(base.Chart, req.Namespace)
		if err != nil {
			return out, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		// Values that came from references are read again, over the last values.
		out.refs, out.reuse = recorded, out.reuse || len(recorded) > 0
	}
	if len(out.refs) == 0 && !out.reuse {
		return out, nil
	}
	if err := s.mayReadValues(ctx, req.Namespace, out.refs, user); err != nil {
		return out, err
	}
	if len(out.refs) > 0 && s.ValuesObjects == nil {
		return out, fmt.Errorf("%w: values_from is not served here", ErrInvalid)
	}
	vals, err := valuesfrom.Load(ctx, s.ValuesObjects, req.Namespace, out.refs)
	if err != nil {
		return out, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	checked := map[string]any{}
	if out.reuse && base != nil {
		valuesfrom.Merge(checked, base.Config)
	}
	out.checked = valuesfrom.Merge(valuesfrom.Merge(checked, vals), req.Values)
	return out, nil
}

// mayReadValues asks whether the caller may get every object the references name.
func (s *Service) mayReadValues(ctx context.Context, namespace string, refs []valuesfrom.Ref, user *auth.User) error {
	if user == nil || s.Authorizer == nil || len(refs) == 0 {
		return nil
	}
	if err := valuesfrom.Validate(refs, namespace); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	needs := make([]auth.Need, 0, len(refs))
	for _, r := range refs {
		needs = append(needs, auth.Need{Verb: "get", Resource: strings.ToLower(r.Kind) + "s", Namespace: namespace, Name: r.Name})
	}
	if err := s.Authorizer.Check(ctx, user, needs...); err != nil {
		return fmt.Errorf("values_from: %w", err)
	}
	return nil
}
