package api

import (
	"errors"

	"github.com/async-helm/async-helm/pkg/valuesfrom"
)

// validateValuesFrom checks the references without the cluster; reuse_values is an
// upgrade's (needChart: an install).
func (r *ReleaseRequest) validateValuesFrom(install bool) error {
	if install && r.ReuseValues {
		return errors.New("reuse_values is for upgrades: an install has no values to reuse")
	}
	return valuesfrom.Validate(r.ValuesFrom, r.Namespace)
}
