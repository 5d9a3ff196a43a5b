package submitter

import (
	"context"
	"fmt"
	"strings"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/valuesfrom"
)

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
