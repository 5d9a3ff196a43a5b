package submitter

import (
	"context"
	"errors"
	"fmt"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release"
)

// rollbackTarget reads revision to, the record a rollback restores, and its apply method
// in one read: the pin digests the record and the apply method it holds together.
func (s *Service) rollbackTarget(ctx context.Context, namespace, name string, to int) (*helmrelease.Release, string, error) {
	target, method, err := s.Store.GetWithApplyMethod(ctx, namespace, name, to)
	if to < 1 || errors.Is(err, release.ErrNotFound) {
		return nil, "", fmt.Errorf("%w: %s/%s has no revision %d", ErrRevisionNotFound, namespace, name, to)
	}
	if err != nil {
		return nil, "", err
	}
	if target.Chart == nil || target.Chart.Metadata == nil {
		return nil, "", fmt.Errorf("%w: revision %d of %s/%s records no chart", ErrRevisionNotFound, to, namespace, name)
	}
	return target, method, nil
}
