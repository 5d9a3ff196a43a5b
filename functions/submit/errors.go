package main

import (
	"errors"
	"net/http"
	"strconv"

	"github.com/async-helm/async-helm/pkg/auth"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/function"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/reader"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/submitter"
	"github.com/async-helm/async-helm/pkg/valuesfrom"
)

// errTooLarge is a body over api.MaxBodyBytes.
var errTooLarge = errors.New("request body too large")

// errorAnswers is the one adapter of submit's routes: it answers a route's error with
// statusOf's status (or the route's own, function.StatusError) and the API's error body.
func (f *Function) errorAnswers() function.Adapter {
	return function.Adapter{Status: statusOf, Header: retryAfter, Log: f.log}
}

// retryAfter tells a client refused by the admission bound when to retry.
func retryAfter(h http.Header, err error) {
	var busy *submitter.BusyError
	if errors.As(err, &busy) {
		h.Set("Retry-After", strconv.Itoa(int(busy.RetryAfter.Seconds())))
	}
}

// statusOf chooses the HTTP status of an error, once, at the edge.
func statusOf(err error) int {
	switch {
	case errors.Is(err, auth.ErrUnauthenticated):
		return http.StatusUnauthorized
	case errors.Is(err, auth.ErrForbidden), errors.Is(err, valuesfrom.ErrForbidden):
		return http.StatusForbidden
	case errors.Is(err, errTooLarge), errors.Is(err, reader.ErrTooLarge):
		return http.StatusRequestEntityTooLarge
	case errors.Is(err, submitter.ErrInvalid), errors.Is(err, chartsource.ErrInvalidRef), errors.Is(err, chartsource.ErrForbiddenHost):
		return http.StatusBadRequest
	case errors.Is(err, release.ErrNotFound), errors.Is(err, submitter.ErrNamespaceNotFound),
		errors.Is(err, submitter.ErrRevisionNotFound):
		return http.StatusNotFound
	case errors.Is(err, release.ErrNameInUse), errors.Is(err, release.ErrPending), errors.Is(err, release.ErrConflict),
		errors.Is(err, submitter.ErrNotPending), errors.Is(err, submitter.ErrNotCancellable),
		errors.Is(err, release.ErrRevisionRange): // the release's history, not the request, is at fault
		return http.StatusConflict
	case errors.Is(err, submitter.ErrValues), errors.Is(err, submitter.ErrRender), errors.Is(err, chartsource.ErrNotFound),
		errors.Is(err, chartsource.ErrUnloadable), errors.Is(err, chartsource.ErrUnreachable),
		errors.Is(err, chartsource.ErrTooLarge), errors.Is(err, release.ErrUndecodable):
		return http.StatusUnprocessableEntity
	case errors.Is(err, submitter.ErrBusy), errors.Is(err, helmexec.ErrRenderBusy):
		return http.StatusTooManyRequests
	case errors.Is(err, submitter.ErrNotAccepted):
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
