package main

import (
	"errors"
	"net/http"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/function"
	"github.com/async-helm/async-helm/pkg/verify"
)

// routeVerify serves the console's POST /api/helm/verify to any authenticated caller: 400
// for a body that is not JSON or a chart URL the console refuses, then the verifier's
// report, or 501 with the reason when this build has no verifier.
func (f *Function) routeVerify(route routeFunc, v verify.Verifier) {
	route("POST "+api.PathVerify, func(w http.ResponseWriter, r *http.Request) error {
		var req api.VerifyRequest
		if err := decode(w, r, &req); err != nil {
			return err
		}
		if err := req.Validate(); err != nil {
			return function.WithStatus(http.StatusBadRequest, errors.New(api.VerifyInvalidURL))
		}
		if err := f.admit(r); err != nil {
			return err
		}
		report, err := v.Verify(r.Context(), req.ChartURL, req.Values)
		switch {
		case errors.Is(err, verify.ErrUnavailable):
			return function.WithStatus(http.StatusNotImplemented, err)
		case err != nil:
			return function.WithStatus(http.StatusBadGateway, errors.New("Failed to verify chart: "+err.Error()))
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(report)
		return nil
	})
}
