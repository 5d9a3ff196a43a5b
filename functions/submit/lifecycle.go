package main

import (
	"net/http"

	"github.com/async-helm/async-helm/pkg/api"
)

// uninstallAsync is the console's DELETE /api/helm/release/async?ns=&name=&version=: the
// latest revision is marked uninstalling and the executor runs the uninstall; 204 as the
// console answers.
func (f *Function) uninstallAsync(w http.ResponseWriter, r *http.Request) {
	ns, name, err := nsAndName(r)
	if err != nil {
		f.fail(w, r, err)
		return
	}
	acc, err := f.svc.Uninstall(r.Context(), ns, name, r.URL.Query().Get("version"), userFrom(r.Context()))
	if err != nil {
		f.fail(w, r, err)
		return
	}
	f.log.Infow("accepted", "action", "uninstall", "namespace", ns, "release", name,
		"revision", acc.Revision, "requestId", acc.RequestID)
	w.Header().Set("Location", statusURL(ns, name))
	w.WriteHeader(http.StatusNoContent)
}

// rollbackAsync is PATCH /api/helm/release/async with the console's rollback body: the next
// revision is reserved pending-rollback; 201 with its secret, as install and upgrade.
func (f *Function) rollbackAsync(w http.ResponseWriter, r *http.Request) {
	var req api.RollbackRequest
	if err := decode(w, r, &req); err != nil {
		f.fail(w, r, err)
		return
	}
	acc, err := f.svc.Rollback(r.Context(), req, userFrom(r.Context()))
	if err != nil {
		f.fail(w, r, err)
		return
	}
	f.log.Infow("accepted", "action", "rollback", "namespace", req.Namespace, "release", req.Name,
		"revision", acc.Revision, "to", req.Version, "requestId", acc.RequestID)
	w.Header().Set("Location", statusURL(req.Namespace, req.Name))
	writeJSON(w, http.StatusCreated, acc.Secret)
}
