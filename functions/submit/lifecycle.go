package main

import (
	"context"
	"fmt"
	"net/http"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/function"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/submitter"
)

// uninstallAsync is the console's DELETE /api/helm/release/async?ns=&name=&version=: the
// latest revision is marked uninstalling for the executor; 204 as the console answers.
func (f *Function) uninstallAsync(w http.ResponseWriter, r *http.Request) error {
	p, acc, err := f.acceptUninstall(r)
	if err != nil {
		return err
	}
	f.log.Infow("accepted", "action", "uninstall", "namespace", p.Namespace, "release", p.Name,
		"revision", acc.Revision, "requestId", acc.RequestID)
	w.Header().Set("Location", statusURL(p.Namespace, p.Name))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// acceptUninstall marks the release's latest revision uninstalling (the async and the sync
// route alike).
func (f *Function) acceptUninstall(r *http.Request) (pending, *submitter.UninstallAccepted, error) {
	ns, name, err := nsAndName(r)
	if err != nil {
		return pending{}, nil, err
	}
	opts, err := api.ParseUninstallQuery(r.URL.Query())
	if err != nil {
		return pending{}, nil, fmt.Errorf("%w: %w", submitter.ErrInvalid, err)
	}
	acc, err := f.svc.Uninstall(r.Context(), ns, name, r.URL.Query().Get("version"), userFrom(r.Context()), opts)
	if err != nil {
		return pending{}, nil, err
	}
	return pending{Action: release.ActionUninstall, Namespace: ns, Name: name, Revision: acc.Revision, RequestID: acc.RequestID}, acc, nil
}

// acceptRollback reserves the rollback's revision (the async and the sync route alike).
func (f *Function) acceptRollback(w http.ResponseWriter, r *http.Request) (api.RollbackRequest, *submitter.Accepted, error) {
	var req api.RollbackRequest
	if err := decode(w, r, &req); err != nil {
		return req, nil, err
	}
	acc, err := f.svc.Rollback(r.Context(), req, userFrom(r.Context()))
	return req, acc, err
}

// rollbackAsync is PATCH /api/helm/release/async with the console's rollback body: the next
// revision is reserved pending-rollback; 201 with its secret, as install and upgrade.
func (f *Function) rollbackAsync(w http.ResponseWriter, r *http.Request) error {
	req, acc, err := f.acceptRollback(w, r)
	if err != nil {
		return err
	}
	f.log.Infow("accepted", "action", "rollback", "namespace", req.Namespace, "release", req.Name,
		"revision", acc.Revision, "to", req.Version, "requestId", acc.RequestID)
	w.Header().Set("Location", statusURL(req.Namespace, req.Name))
	function.WriteJSON(w, http.StatusCreated, acc.Secret)
	return nil
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

// pending is an accepted revision a synchronous route waits for.
type pending struct {
	Action          release.Action
	Namespace, Name string
	Revision        int
	RequestID       string
}

// submitSync is the console's POST (install) and PUT (upgrade) /api/helm/release: accepted
// as the async route, then answered with the release when it is final.
func (f *Function) submitSync(action release.Action) function.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		req, acc, err := f.acceptSubmit(w, r, action)
		if err != nil {
			return err
		}
		return f.answerFinal(w, r, pending{Action: action, Namespace: req.Namespace, Name: req.Name,
			Revision: acc.Revision, RequestID: acc.RequestID})
	}
}

// rollbackSync is the console's PATCH /api/helm/release.
func (f *Function) rollbackSync(w http.ResponseWriter, r *http.Request) error {
	req, acc, err := f.acceptRollback(w, r)
	if err != nil {
		return err
	}
	return f.answerFinal(w, r, pending{Action: release.ActionRollback, Namespace: req.Namespace, Name: req.Name,
		Revision: acc.Revision, RequestID: acc.RequestID})
}

// uninstallSync is the console's DELETE /api/helm/release?ns=&name=: answered, once the
// release is gone, with Helm's UninstallReleaseResponse as the console answers it.
func (f *Function) uninstallSync(w http.ResponseWriter, r *http.Request) error {
	p, acc, err := f.acceptUninstall(r)
	if err != nil {
		return err
	}
	if err := f.awaitFinal(r, p); err != nil {
		return err
	}
	out := *acc.Release
	info := *out.Info
	info.Status, info.Description = helmrelease.StatusUninstalled, "Uninstallation complete"
	out.Info = &info
	function.WriteJSON(w, http.StatusOK, helmrelease.UninstallReleaseResponse{Release: &out})
	return nil
}

// answerFinal waits for the accepted revision to end and answers as the console: the
// release when deployed, else awaitFinal's error.
func (f *Function) answerFinal(w http.ResponseWriter, r *http.Request, p pending) error {
	if err := f.awaitFinal(r, p); err != nil {
		return err
	}
	rel, err := f.svc.Store.Get(r.Context(), p.Namespace, p.Name, p.Revision)
	if err != nil {
		return err
	}
	function.WriteJSON(w, http.StatusOK, rel)
	return nil
}

// awaitFinal waits, within SYNC_TIMEOUT and the client's own deadline, for p's revision to
// end as its action wants (deployed; an uninstall's gone): else 502 with the console's words
// and Helm's reason, or 504 when the wait ended first (the work goes on).
func (f *Function) awaitFinal(r *http.Request, p pending) error {
	d := f.cfg.SyncTimeout
	if d <= 0 {
		d = api.DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(r.Context(), d)
	defer cancel()
	rev, gone, err := f.svc.Await(ctx, p.Namespace, p.Name, p.Revision, p.RequestID, syncPoll)
	switch {
	case err != nil:
		return function.WithStatus(http.StatusGatewayTimeout, fmt.Errorf("%v; it was accepted and goes on: follow GET %s", err, statusURL(p.Namespace, p.Name)))
	case gone && p.Action == release.ActionUninstall:
		return nil
	case gone:
		// An atomic install that failed is uninstalled by Helm: nothing is left.
		return function.WithStatus(http.StatusBadGateway, fmt.Errorf("%s: revision %d of %s/%s is gone (an atomic install failed and was uninstalled)",
			syncFailure[p.Action], p.Revision, p.Namespace, p.Name))
	case rev.Status == string(helmrelease.StatusDeployed) && p.Action != release.ActionUninstall:
		return nil
	}
	reason := "failed"
	if rel, err := f.svc.Store.Get(r.Context(), p.Namespace, p.Name, rev.Version); err == nil && rel.Info != nil {
		reason = rel.Info.Description
	}
	return function.WithStatus(http.StatusBadGateway, fmt.Errorf("%s: %s", syncFailure[p.Action], reason))
}
