package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/submitter"
)

// uninstallAsync is the console's DELETE /api/helm/release/async?ns=&name=&version=: the
// latest revision is marked uninstalling and the executor runs the uninstall; 204 as the
// console answers.
func (f *Function) uninstallAsync(w http.ResponseWriter, r *http.Request) {
	ns, name, acc, ok := f.acceptUninstall(w, r)
	if !ok {
		return
	}
	f.log.Infow("accepted", "action", "uninstall", "namespace", ns, "release", name,
		"revision", acc.Revision, "requestId", acc.RequestID)
	w.Header().Set("Location", statusURL(ns, name))
	w.WriteHeader(http.StatusNoContent)
}

// acceptUninstall marks the release's latest revision uninstalling (the async and the sync
// route alike); on an error it has answered.
func (f *Function) acceptUninstall(w http.ResponseWriter, r *http.Request) (ns, name string, acc *submitter.UninstallAccepted, ok bool) {
	ns, name, err := nsAndName(r)
	if err == nil {
		acc, err = f.svc.Uninstall(r.Context(), ns, name, r.URL.Query().Get("version"), userFrom(r.Context()))
	}
	if err != nil {
		f.fail(w, r, err)
		return "", "", nil, false
	}
	return ns, name, acc, true
}

// acceptRollback reserves the rollback's revision (the async and the sync route alike); on
// an error it has answered.
func (f *Function) acceptRollback(w http.ResponseWriter, r *http.Request) (api.RollbackRequest, *submitter.Accepted, bool) {
	var req api.RollbackRequest
	err := decode(w, r, &req)
	var acc *submitter.Accepted
	if err == nil {
		acc, err = f.svc.Rollback(r.Context(), req, userFrom(r.Context()))
	}
	if err != nil {
		f.fail(w, r, err)
		return req, nil, false
	}
	return req, acc, true
}

// rollbackAsync is PATCH /api/helm/release/async with the console's rollback body: the next
// revision is reserved pending-rollback; 201 with its secret, as install and upgrade.
func (f *Function) rollbackAsync(w http.ResponseWriter, r *http.Request) {
	req, acc, ok := f.acceptRollback(w, r)
	if !ok {
		return
	}
	f.log.Infow("accepted", "action", "rollback", "namespace", req.Namespace, "release", req.Name,
		"revision", acc.Revision, "to", req.Version, "requestId", acc.RequestID)
	w.Header().Set("Location", statusURL(req.Namespace, req.Name))
	writeJSON(w, http.StatusCreated, acc.Secret)
}

// syncPoll is how often a synchronous route looks at the revision it waits for (a read of
// the informer cache).
const syncPoll = 200 * time.Millisecond

// The console's words for a failed synchronous action (pkg/helm/handlers).
var syncFailure = map[release.Action]string{
	release.ActionInstall:   "Failed to install helm chart",
	release.ActionUpgrade:   "Failed to upgrade helm release",
	release.ActionRollback:  "Failed to rollback helm releases",
	release.ActionUninstall: "Failed to uninstall helm release",
}

// submitSync is the console's POST (install) and PUT (upgrade) /api/helm/release: accepted
// as the async route, then answered with the release when it is final.
func (f *Function) submitSync(action release.Action) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		req, acc, ok := f.acceptSubmit(w, r, action)
		if !ok {
			return
		}
		f.answerFinal(w, r, action, req.Namespace, req.Name, acc.Revision, acc.RequestID)
	}
}

// rollbackSync is the console's PATCH /api/helm/release.
func (f *Function) rollbackSync(w http.ResponseWriter, r *http.Request) {
	req, acc, ok := f.acceptRollback(w, r)
	if !ok {
		return
	}
	f.answerFinal(w, r, release.ActionRollback, req.Namespace, req.Name, acc.Revision, acc.RequestID)
}

// uninstallSync is the console's DELETE /api/helm/release?ns=&name=: answered, once the
// release is gone, with Helm's UninstallReleaseResponse as the console answers it.
func (f *Function) uninstallSync(w http.ResponseWriter, r *http.Request) {
	ns, name, acc, ok := f.acceptUninstall(w, r)
	if !ok {
		return
	}
	ctx, cancel := f.syncContext(r)
	defer cancel()
	rev, gone, err := f.svc.Await(ctx, ns, name, acc.Revision, acc.RequestID, syncPoll)
	switch {
	case err != nil:
		f.syncTimeout(w, r, ns, name, err)
	case !gone:
		f.syncFailed(w, r, release.ActionUninstall, ns, name, rev.Version)
	default:
		out := *acc.Release
		info := *out.Info
		info.Status, info.Description = helmrelease.StatusUninstalled, "Uninstallation complete"
		out.Info = &info
		writeJSON(w, http.StatusOK, helmrelease.UninstallReleaseResponse{Release: &out})
	}
}

// answerFinal waits for the accepted revision to end and answers as the console: the
// release when deployed, 502 with the reason when failed, 504 on the deadline.
func (f *Function) answerFinal(w http.ResponseWriter, r *http.Request, action release.Action, ns, name string, revision int, requestID string) {
	ctx, cancel := f.syncContext(r)
	defer cancel()
	rev, gone, err := f.svc.Await(ctx, ns, name, revision, requestID, syncPoll)
	switch {
	case err != nil:
		f.syncTimeout(w, r, ns, name, err)
	case gone:
		// An atomic install that failed is uninstalled by Helm: nothing is left.
		writeJSON(w, http.StatusBadGateway, api.Error{Error: fmt.Sprintf("%s: revision %d of %s/%s is gone (an atomic install failed and was uninstalled)",
			syncFailure[action], revision, ns, name)})
	case rev.Status != string(helmrelease.StatusDeployed):
		f.syncFailed(w, r, action, ns, name, rev.Version)
	default:
		rel, err := f.svc.Store.Get(r.Context(), ns, name, revision)
		if err != nil {
			f.fail(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, rel)
	}
}

// syncContext bounds a synchronous wait by SYNC_TIMEOUT and the client's own deadline.
func (f *Function) syncContext(r *http.Request) (context.Context, context.CancelFunc) {
	d := f.cfg.SyncTimeout
	if d <= 0 {
		d = api.DefaultTimeout
	}
	return context.WithTimeout(r.Context(), d)
}

func (f *Function) syncFailed(w http.ResponseWriter, r *http.Request, action release.Action, ns, name string, revision int) {
	reason := "failed"
	if rel, err := f.svc.Store.Get(r.Context(), ns, name, revision); err == nil && rel.Info != nil {
		reason = rel.Info.Description
	}
	writeJSON(w, http.StatusBadGateway, api.Error{Error: fmt.Sprintf("%s: %s", syncFailure[action], reason)})
}

// syncTimeout answers a wait that ended first: 504, and the work goes on.
func (f *Function) syncTimeout(w http.ResponseWriter, r *http.Request, ns, name string, err error) {
	f.log.Infow("synchronous wait ended; the action goes on", "method", r.Method, "namespace", ns, "release", name, "error", err)
	writeJSON(w, http.StatusGatewayTimeout, api.Error{Error: fmt.Sprintf("%v; it was accepted and goes on: follow GET %s", err, statusURL(ns, name))})
}
