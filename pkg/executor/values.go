package executor

import (
	"context"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/chart"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/valuesfrom"
)

// ValuesReaderAs builds readers of values_from that act as the caller; an empty caller (a
// trusted local run) reads with cfg's own identity, as the executor's Helm actions do.
func ValuesReaderAs(cfg *rest.Config) func(events.Caller) (valuesfrom.Reader, error) {
	return func(c events.Caller) (valuesfrom.Reader, error) {
		cs, err := kube.Impersonating(cfg, rest.ImpersonationConfig{UserName: c.User, UID: c.UID, Groups: c.Groups, Extra: c.Extra})
		if err != nil {
			return nil, err
		}
		return valuesfrom.KubeReader{Client: cs}, nil
	}
}

// actionValues are the values an install or upgrade runs with: its values_from read now, as
// its caller and within valuesfrom's bounds, merged in order under its inline values. The
// event carries only the references.
func (s *Service) actionValues(ctx context.Context, a events.Action) (map[string]any, error) {
	if len(a.ValuesFrom) == 0 {
		return a.Values, nil
	}
	if s.ValuesAs == nil {
		return nil, errors.New("values_from: this executor reads no values objects")
	}
	r, err := s.ValuesAs(a.Caller)
	if err != nil {
		return nil, err
	}
	vals, err := valuesfrom.Values(ctx, r, a.Namespace, a.ValuesFrom, a.Values)
	if err != nil {
		return nil, fmt.Errorf("values_from of %s/%s: %w", a.Namespace, a.Name, err)
	}
	return vals, nil
}

// recordValuesFrom keeps the action's references in the chart Helm stores with the release
// (release.AnnotationValuesFrom), so an upgrade reusing values reads them again.
func recordValuesFrom(a events.Action) func(*chart.Chart) error {
	return func(ch *chart.Chart) error { return release.RecordValuesFrom(ch, a.ValuesFrom) }
}
