package main

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/async-helm/async-helm/pkg/release"
)

// A release record a tenant wrote by hand that does not decode is the request's problem
// (422 with the reason), not the service's (500).
func TestUndecodableRecordIs422(t *testing.T) {
	err := fmt.Errorf("upgrade ns/web: %w", fmt.Errorf("%w: illegal base64 data", release.ErrUndecodable))
	if got := statusOf(err); got != http.StatusUnprocessableEntity {
		t.Errorf("statusOf(%v) = %d, want 422", err, got)
	}
}
