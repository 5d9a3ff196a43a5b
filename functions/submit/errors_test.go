package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/submitter"
)

// A release record a tenant wrote by hand that does not decode is the request's problem
// (422 with the reason), not the service's (500).
func TestUndecodableRecordIs422(t *testing.T) {
	err := fmt.Errorf("upgrade ns/web: %w", fmt.Errorf("%w: illegal base64 data", release.ErrUndecodable))
	if got := statusOf(err); got != http.StatusUnprocessableEntity {
		t.Errorf("statusOf(%v) = %d, want 422", err, got)
	}
}

// A release whose next revision would pass release.MaxRevision (a tenant's Secret named
// …web.v9223372036854775807, whose +1 wrapped negative) is 409, as any state of the release
// that refuses a request, not 500.
func TestRevisionOutOfRangeIs409(t *testing.T) {
	err := fmt.Errorf("upgrade ns/web: %w", fmt.Errorf("%w: ns/web has revision 9223372036854775807", release.ErrRevisionRange))
	if got := statusOf(err); got != http.StatusConflict {
		t.Errorf("statusOf(%v) = %d, want 409", err, got)
	}
}

// The uninstall of a revision a release does not have is 404 naming the revision: it said
// "release not found: ns/web" of a release that exists.
func TestUninstallOfAMissingRevisionIs404NamingIt(t *testing.T) {
	w := httptest.NewRecorder()
	f := &Function{log: zap.NewNop().Sugar()}
	r := httptest.NewRequest(http.MethodDelete, api.PathAsync+"?ns=ns&name=web&version=3", nil)
	f.errorAnswers().Answer(w, r, &submitter.RevisionNotFoundError{Namespace: "ns", Name: "web", Revision: 3})
	if want := `{"error":"revision 3 of ns/web not found"}`; w.Code != http.StatusNotFound || strings.TrimSpace(w.Body.String()) != want {
		t.Errorf("answered %d %s; want 404 %s", w.Code, w.Body, want)
	}
}

// A values check that found no free child in time is 429, as a render's is on the template
// and diff routes: the same request can pass once a child is free.
func TestValuesCheckBusyIs429(t *testing.T) {
	err := fmt.Errorf("install ns/web: %w", fmt.Errorf("%w: 2 children run, none ended within 10s", helmexec.ErrRenderBusy))
	if got := statusOf(err); got != http.StatusTooManyRequests {
		t.Errorf("statusOf(%v) = %d, want 429", err, got)
	}
}

// Values a recursive schema could not check within its bounds are the request's: 422.
func TestValuesUncheckedIs422(t *testing.T) {
	err := fmt.Errorf("%w: %w: the check needs more than 256 MiB of memory", submitter.ErrValues, helmexec.ErrValuesUnchecked)
	if got := statusOf(err); got != http.StatusUnprocessableEntity {
		t.Errorf("statusOf(%v) = %d, want 422", err, got)
	}
}
