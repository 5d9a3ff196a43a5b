package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/submitclient"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// attemptNote is the executor's note on a failed attempt: "(attempt 1 of 4; retried as revision 2)".
var attemptNote = regexp.MustCompile(`\(attempt \d+ of \d+(; ([^)]*))?\)$`)

// noteWait bounds how long a failed attempt is watched for its note (written right after).
const noteWait = 30 * time.Second

// attempts follows a request's revisions until one of its attempts is deployed (nil) or it failed (ErrFailed).
func (t tracker) attempts(ctx context.Context, accepted int, remediation string) error {
	remediated := ""
	for {
		rel, err := t.follow(ctx)
		if err != nil {
			return t.goneAfter(err, remediation)
		}
		if st := statusOf(rel); st != helmrelease.StatusFailed.String() {
			// The request's own success is its accepted revision or a retry ("attempt k of n");
			// anything else (the remediation's rollback) means the request failed.
			ours := rel.Version == accepted || attemptNote.MatchString(rel.Info.Description)
			if remediated != "" {
				remediated = " (" + remediated + ")"
			}
			if remediated != "" || st != helmrelease.StatusDeployed.String() || !ours {
				return fmt.Errorf("%w: %s revision %d is %s: %s%s", ErrFailed, t.name, rel.Version, st, rel.Info.Description, remediated)
			}
			return nil
		}
		next, err := t.awaitNote(ctx, rel)
		if err != nil {
			return t.goneAfter(err, remediation)
		}
		if next.Version != rel.Version { // the next revision is reserved: follow it
			continue
		}
		m := attemptNote.FindStringSubmatch(next.Info.Description)
		if m == nil || !(strings.HasPrefix(m[2], "retried as revision") || strings.HasPrefix(m[2], "remediated by")) {
			return fmt.Errorf("%w: %s revision %d is failed", ErrFailed, t.name, rel.Version)
		}
		if strings.HasPrefix(m[2], "remediated by") {
			remediated = m[2]
		}
		// The remediation (or the next attempt) starts on the executor.
		if err := t.g.pause(ctx); err != nil {
			return err
		}
	}
}

// awaitNote polls a failed revision until its note or a newer one appears, within noteWait.
func (t tracker) awaitNote(ctx context.Context, rel *api.Release) (*api.Release, error) {
	deadline := wallclock.Or(t.g.Clock).Now().Add(noteWait)
	for {
		if rel.Info != nil && attemptNote.MatchString(rel.Info.Description) {
			return rel, nil
		}
		if err := t.g.pause(ctx); err != nil {
			return nil, err
		}
		next, err := t.c.Get(ctx, t.ns, t.name)
		if err != nil {
			return nil, err
		}
		if next.Version != rel.Version || !wallclock.Or(t.g.Clock).Now().Before(deadline) {
			return next, nil
		}
		rel = next
	}
}

// goneAfter turns the release's disappearance after an uninstall remediation into ErrFailed.
func (t tracker) goneAfter(err error, remediation string) error {
	var apiErr *submitclient.APIError
	if remediation == api.RemediationUninstall && errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
		return fmt.Errorf("%w: %s was uninstalled (remediated by uninstall)", ErrFailed, t.name)
	}
	return err
}
