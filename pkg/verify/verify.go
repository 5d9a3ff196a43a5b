// Package verify answers the console's POST /api/helm/verify with Red Hat's chart-verifier,
// as the console does, or not at all (never an imitation): the version the console pins
// cannot be had where async-helm is built (Unavailable).
package verify

import (
	"context"
	"errors"
	"fmt"
)

// ErrUnavailable is a verification that cannot run here (501).
var ErrUnavailable = errors.New("chart verification is not available")

// Verifier verifies the chart at chartURL with the verifier's values (values["provider"]
// is the profile's vendor type) and answers the report as the console does (JSON).
type Verifier interface {
	Verify(ctx context.Context, chartURL string, values map[string]any) ([]byte, error)
}

// PinnedVersion is the chart-verifier version openshift/console's go.mod pins (August 2026).
const PinnedVersion = "github.com/redhat-certification/chart-verifier v0.0.0-20260617140039-1bf8aaca404e"

// Reason is why there is no verifier: what the Go module proxy answers for the pinned version.
const Reason = "async-helm is built without Red Hat's chart-verifier: the Go module proxy refuses " +
	PinnedVersion + " (the version the OpenShift console pins) with 403 \"This module version is not available\""

// Unavailable is the Verifier of a build without chart-verifier: ErrUnavailable, with the reason.
type Unavailable struct{ Reason string }

// Verify implements Verifier.
func (u Unavailable) Verify(context.Context, string, map[string]any) ([]byte, error) {
	return nil, fmt.Errorf("%w: %s", ErrUnavailable, u.Reason)
}
