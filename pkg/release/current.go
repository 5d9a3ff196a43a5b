package release

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
)

// Every record async-helm writes itself (the reservation, a failure before Helm adopted it)
// describes what is in the cluster, as Helm's do, so `helm uninstall`, `rollback` and
// `upgrade` act on the right resources.

// Current is the revision an upgrade of release name starts from, as Helm's upgrade chooses
// it: the latest deployed revision below revision, else the latest below it if that one
// failed or was superseded; nil when there is none.
func (s *Store) Current(ctx context.Context, namespace, name string, below int) (*helmrelease.Release, error) {
	if s.Revisions != nil {
		rel, seen, err := s.current(ctx, namespace, name, below, true)
		// The cache is trusted only when it has seen revision below-1 (NextRevision's answer
		// came from it too) and found a base: "no base", or a base picked from a history
		// missing revisions, must not come from a cache that lags.
		if err != nil || (rel != nil && seen == below-1) {
			return rel, err
		}
	}
	rel, _, err := s.current(ctx, namespace, name, below, false)
	return rel, err
}

// current also answers the newest revision below below that the history it read holds.
func (s *Store) current(ctx context.Context, namespace, name string, below int, cached bool) (*helmrelease.Release, int, error) {
	revs, err := s.history(ctx, namespace, name, cached)
	if err != nil {
		return nil, 0, err
	}
	var last *Revision
	for i := range revs { // newest first
		r := &revs[i]
		if r.Version >= below {
			continue
		}
		if last == nil {
			last = r
		}
		if r.Status == string(helmrelease.StatusDeployed) {
			rel, err := s.Get(ctx, namespace, name, r.Version)
			return rel, last.Version, err
		}
	}
	if last == nil {
		return nil, 0, nil
	}
	if last.Status == string(helmrelease.StatusFailed) || last.Status == string(helmrelease.StatusSuperseded) {
		rel, err := s.Get(ctx, namespace, name, last.Version)
		return rel, last.Version, err
	}
	return nil, last.Version, nil
}

// Deployed is the latest deployed revision of a release, whose chart a chart-less upgrade
// runs (the rule of submit and executor alike); ErrNotFound when none is deployed.
func (s *Store) Deployed(ctx context.Context, namespace, name string) (*helmrelease.Release, error) {
	rel, err := s.deployed(ctx, namespace, name, s.Revisions != nil)
	if errors.Is(err, ErrNotFound) && s.Revisions != nil {
		// As in Current: a refusal is confirmed with the API server.
		return s.deployed(ctx, namespace, name, false)
	}
	return rel, err
}

func (s *Store) deployed(ctx context.Context, namespace, name string, cached bool) (*helmrelease.Release, error) {
	revs, err := s.history(ctx, namespace, name, cached)
	if err != nil {
		return nil, err
	}
	for _, r := range revs {
		if r.Status == string(helmrelease.StatusDeployed) {
			return s.Get(ctx, namespace, name, r.Version)
		}
	}
	return nil, fmt.Errorf("%w: %s/%s has no deployed revision", ErrNotFound, namespace, name)
}

// ChartDigest identifies a chart stored in a release record: sha256 of its JSON encoding, as
// Helm stores it. A chart-less upgrade's event carries the deployed chart's; the executor
// runs that chart only if it still has that digest.
func ChartDigest(ch *chart.Chart) (string, error) {
	b, err := json.Marshal(ch)
	if err != nil {
		return "", fmt.Errorf("encode chart: %w", err)
	}
	sum := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// adopted reports whether Helm wrote rel: Helm stores the whole chart, templates
// included; a reservation stores only the chart's metadata.
func adopted(rel *helmrelease.Release) bool {
	return rel.Chart != nil && len(rel.Chart.Templates) > 0
}

// failUnadopted turns a reservation Helm never adopted into the failed record Helm
// itself would leave if it had refused before changing anything. Nothing of the request
// was applied, so the record describes the cluster as it is: an upgrade's carries the
// chart, values, manifest, hooks and notes of base (the revision the upgrade started
// from, see Current); an install's keeps an empty manifest (nothing was created).
func failUnadopted(rel, base *helmrelease.Release, reason string) {
	delete(rel.Labels, LabelQueued)
	rel.Info.Status = helmrelease.StatusFailed
	if base == nil {
		rel.Info.Description = reason + "; nothing was installed"
		return
	}
	rel.Chart, rel.Config, rel.Manifest, rel.Hooks = base.Chart, base.Config, base.Manifest, base.Hooks
	rel.Info.FirstDeployed, rel.Info.Notes = base.Info.FirstDeployed, base.Info.Notes
	rel.Info.Description = fmt.Sprintf("%s; nothing was applied, the revision keeps revision %d's chart, values and manifest", reason, base.Version)
	if rel.Labels != nil && base.Chart != nil && base.Chart.Metadata != nil {
		if l := ChartLabel(base.Chart.Metadata.Name, base.Chart.Metadata.Version); l != "" {
			rel.Labels[LabelChart] = l
		} else {
			delete(rel.Labels, LabelChart)
		}
	}
}
