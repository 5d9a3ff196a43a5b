package api

import (
	"cmp"
	"fmt"

	"github.com/async-helm/async-helm/pkg/diff"
	"github.com/async-helm/async-helm/pkg/release"
)

// PathDiff is POST: what an install, upgrade or rollback would change (DiffRequest, Diff).
const PathDiff = "/api/helm/release/diff"

// DiffRequest is an install or upgrade body (a rollback's: name, namespace, version) and more.
type DiffRequest struct {
	ReleaseRequest
	// Action is "upgrade" (default), "install" or "rollback".
	Action string `json:"action,omitempty"`
	// Version (rollback) is the revision to return to; 0: the one before the latest.
	Version int `json:"version,omitempty"`
	// Context is helm-diff's --context: lines around each change; nil or negative: whole objects.
	Context *int `json:"context,omitempty"`
	// IncludeCRDs (install, upgrade) compares the chart's crds/ too, as helm-diff's
	// --include-crds does: a release's manifest never holds them, so they show as added.
	IncludeCRDs bool `json:"include_crds,omitempty"`
}

// ParsedAction is the action the diff previews.
func (r *DiffRequest) ParsedAction() (release.Action, error) {
	switch a := release.Action(cmp.Or(r.Action, string(release.ActionUpgrade))); a {
	case release.ActionUpgrade, release.ActionInstall, release.ActionRollback:
		return a, nil
	}
	return "", fmt.Errorf("action %q: want install, upgrade or rollback", r.Action)
}

// Validate checks the request as the action it previews would be checked.
func (r *DiffRequest) Validate() (release.Action, error) {
	a, err := r.ParsedAction()
	if err != nil {
		return a, err
	}
	if a == release.ActionRollback {
		rb := RollbackRequest{Name: r.Name, Namespace: r.Namespace, Version: r.Version, Timeout: r.Timeout}
		return a, rb.Validate()
	}
	return a, r.ReleaseRequest.Validate(a == release.ActionInstall)
}

// ContextLines is Context, -1 when none was asked.
func (r *DiffRequest) ContextLines() int {
	if r.Context == nil {
		return -1
	}
	return *r.Context
}

// Diff answers a DiffRequest: the changes from revision From (0: an install) to the action's To.
type Diff struct {
	Namespace string        `json:"namespace"`
	Name      string        `json:"name"`
	Action    string        `json:"action"`
	From      int           `json:"from"`
	To        int           `json:"to"`
	Changes   []diff.Change `json:"changes"`
}
