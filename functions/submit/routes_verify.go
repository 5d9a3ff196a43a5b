package main

import (
	"errors"
	"net/http"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/verify"
)

// routeVerify serves the console's POST /api/helm/verify: any authenticated caller (the
// console's authHandlerWithUser: 401 without a token, 403 for a failed CSRF check), 400
// for a body that is not JSON or a chart URL the console refuses, then the verifier's
// report, or 501 with the reason when this build has no verifier.
func (f *Function) routeVerify(mux *http.ServeMux, v verify.Verifier) {
	mux.HandleFunc("POST "+api.PathVerify, f.authenticated(func(w http.ResponseWriter, r *http.Request) {
		var req api.VerifyRequest
		if err := decode(w, r, &req); err != nil {
			f.fail(w, r, err)
			return
		}
		if err := req.Validate(); err != nil {
			f.refuse(w, r, http.StatusBadRequest, errors.New(api.VerifyInvalidURL))
			return
		}
		if !f.admit(w, r) {
			return
		}
		report, err := v.Verify(r.Context(), req.ChartURL, req.Values)
		switch {
		case errors.Is(err, verify.ErrUnavailable):
			f.refuse(w, r, http.StatusNotImplemented, err)
		case err != nil:
			f.refuse(w, r, http.StatusBadGateway, errors.New("Failed to verify chart: "+err.Error()))
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write(report)
		}
	}))
}
