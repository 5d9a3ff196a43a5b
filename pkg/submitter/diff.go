package submitter

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"sigs.k8s.io/yaml"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	"github.com/async-helm/async-helm/pkg/diff"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
)

// DiffRenderer is what a diff renders with: the template route's render slots and child.
type DiffRenderer interface {
	// Slot takes a render slot of the caller's tenant (429 when none comes in time); the work
	// in it uses bounded, which ends when the slot's hold reaches the render bound.
	Slot(ctx context.Context, user *auth.User, namespace string) (bounded context.Context, release func(), err error)
	// Render renders job in a child killed at its deadline (ErrRender: it does not render).
	Render(ctx context.Context, job helmexec.ChartRender) (string, error)
}

// ErrRender is a chart that does not render with the values, or manifests not compared (422).
var ErrRender = errors.New("the chart does not render")

// Diff answers what the action of req would change in its release (docs/design.md, "The
// diff of an action"), in a render slot of the caller's tenant; nothing is reserved or sent.
func (s *Service) Diff(ctx context.Context, req api.DiffRequest, user *auth.User) (*api.Diff, error) {
	action, err := req.Validate()
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if _, err := s.authorize(ctx, user, req.Namespace, "list", "create", "update"); err != nil {
		return nil, err
	}
	if err := s.namespaceExists(req.Namespace); err != nil {
		return nil, err
	}
	if s.Render == nil {
		return nil, fmt.Errorf("%w: this submit renders no diffs", ErrInvalid)
	}
	// The slot comes before the records are decoded and the chart packaged: that work is the
	// tenant's too, and bounded by the slot's hold.
	ctx, release, err := s.Render.Slot(ctx, user, req.Namespace)
	if err != nil {
		return nil, err
	}
	defer release()
	latest, base, err := s.diffBase(ctx, req.Namespace, req.Name, action)
	if err != nil {
		return nil, err
	}
	out := &api.Diff{Namespace: req.Namespace, Name: req.Name, Action: string(action), To: latest + 1}
	if base != nil {
		out.From = base.Version
	}
	after, err := s.proposed(ctx, action, req, base, latest, user)
	if err != nil {
		return nil, err
	}
	if after.job != nil {
		if after.manifest, err = s.Render.Render(ctx, *after.job); err != nil {
			return nil, err
		}
		if !req.IncludeCRDs {
			after.manifest = withoutCRDs(after.manifest)
		}
	}
	if out.Changes, err = diff.Compute(ctx, manifestOf(base), after.manifest, req.Namespace, diff.Options{Context: req.ContextLines()}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRender, err)
	}
	return out, nil
}

// proposal is what the action would apply: a stored manifest (rollback) or a render.
type proposal struct {
	manifest string
	job      *helmexec.ChartRender
}

func (s *Service) proposed(ctx context.Context, action release.Action, req api.DiffRequest, base *helmrelease.Release, latest int, user *auth.User) (proposal, error) {
	if action == release.ActionRollback {
		m, err := s.rollbackManifest(ctx, req, latest)
		return proposal{manifest: m}, err
	}
	job, err := s.renderJob(ctx, action, req.ReleaseRequest, base, user)
	if job != nil { // rendered as the action renders: the revision it makes, an upgrade or not
		job.Revision, job.Upgrade = latest+1, action == release.ActionUpgrade
	}
	return proposal{job: job}, err
}

// diffBase is the release's latest revision and the one its action starts from (nil: an
// install), refusing what the action would refuse.
func (s *Service) diffBase(ctx context.Context, namespace, name string, action release.Action) (int, *helmrelease.Release, error) {
	revs, err := s.Store.History(ctx, namespace, name)
	if err != nil {
		return 0, nil, err
	}
	latest := 0
	for _, r := range revs {
		latest = max(latest, r.Version)
	}
	switch {
	case action == release.ActionInstall && latest > 0:
		return 0, nil, fmt.Errorf("%w: %s/%s", release.ErrNameInUse, namespace, name)
	case action == release.ActionInstall:
		return 0, nil, nil
	case latest == 0:
		return 0, nil, fmt.Errorf("%w: %s/%s", release.ErrNotFound, namespace, name)
	}
	base, err := s.Store.Current(ctx, namespace, name, latest+1)
	if err == nil && base == nil {
		err = fmt.Errorf("%w: %s/%s has no deployed, failed or superseded revision", release.ErrNotFound, namespace, name)
	}
	return latest, base, err
}

// rollbackManifest is what a rollback to req.Version applies: that revision's manifest.
func (s *Service) rollbackManifest(ctx context.Context, req api.DiffRequest, latest int) (string, error) {
	to := req.Version
	if to == 0 {
		to = latest - 1
	}
	if to < 1 {
		return "", fmt.Errorf("%w: %s/%s has no revision before %d", ErrRevisionNotFound, req.Namespace, req.Name, latest)
	}
	target, err := s.Store.Get(ctx, req.Namespace, req.Name, to)
	if errors.Is(err, release.ErrNotFound) {
		return "", fmt.Errorf("%w: %s/%s has no revision %d", ErrRevisionNotFound, req.Namespace, req.Name, to)
	}
	if err != nil {
		return "", err
	}
	return manifestOf(target), nil
}

// renderJob renders an install or upgrade, its chart and values checked as Submit does.
func (s *Service) renderJob(ctx context.Context, action release.Action, req api.ReleaseRequest, base *helmrelease.Release, user *auth.User) (*helmexec.ChartRender, error) {
	vals, err := s.resolveValues(ctx, action, req, base, user)
	if err != nil {
		return nil, err
	}
	ctx = withCaller(ctx, callerOf(user))
	ref := chartRef(req, base)
	ch, digest, err := s.chart(ctx, req, ref, base, user)
	if err != nil {
		return nil, err
	}
	if err := s.Schemas.validateValues(ctx, ch, digest, vals.checked); err != nil {
		return nil, err
	}
	values := vals.checked
	if action == release.ActionUpgrade && len(values) == 0 && !vals.reuse && base != nil {
		values = base.Config // Helm's upgrade without values keeps the last ones
	}
	archive, err := s.archiveOf(ctx, req, ref, ch)
	if err != nil {
		return nil, err
	}
	return &helmexec.ChartRender{Namespace: req.Namespace, Name: req.Name, Archive: archive, Values: values}, nil
}

// archiveOf is the archive a render child loads: the fetched chart's, or the base
// revision's stored chart packaged.
func (s *Service) archiveOf(ctx context.Context, req api.ReleaseRequest, ref chartref.Ref, ch *chart.Chart) ([]byte, error) {
	if req.ChartURL != "" || req.IndexEntry != "" {
		c, err := s.Charts.Get(ctx, ref)
		if err != nil {
			return nil, err
		}
		return c.Data, nil
	}
	dir, err := os.MkdirTemp("", "async-helm-diff")
	if err != nil {
		return nil, fmt.Errorf("package the release's chart: %w", err)
	}
	defer os.RemoveAll(dir)
	withValues, err := withValuesFiles(ch)
	if err != nil {
		return nil, fmt.Errorf("%w: the release record's chart is malformed: %w", ErrRender, err)
	}
	path, err := saveChart(withValues, dir)
	if err != nil { // the record is the tenant's: its chart may not be one Helm saves
		return nil, fmt.Errorf("%w: package the release's chart: %w", ErrRender, err)
	}
	return os.ReadFile(path)
}

// saveChart is chartutil.Save answering an error for a chart it panics on: the chart is a
// tenant's record, checked by withValuesFiles only for what is known to panic.
func saveChart(ch *chart.Chart, dir string) (path string, err error) {
	defer func() {
		if r := recover(); r != nil {
			path, err = "", fmt.Errorf("the release record's chart is malformed: %v", r)
		}
	}()
	return chartutil.Save(ch, dir)
}

// withValuesFiles is a copy of a stored chart whose charts have their values.yaml again:
// chartutil.Save writes it from Raw, which a release record does not keep.
func withValuesFiles(ch *chart.Chart) (*chart.Chart, error) {
	for _, files := range [][]*chart.File{ch.Templates, ch.Files} {
		for _, f := range files {
			if f == nil {
				return nil, fmt.Errorf("a null file in chart %s", ch.Name())
			}
		}
	}
	c := *ch
	raw, err := yaml.Marshal(ch.Values)
	if err != nil {
		return nil, fmt.Errorf("values of %s: %w", ch.Name(), err)
	}
	c.Raw = []*chart.File{{Name: chartutil.ValuesfileName, Data: raw}}
	deps := make([]*chart.Chart, 0, len(ch.Dependencies()))
	for _, d := range ch.Dependencies() {
		dc, err := withValuesFiles(d)
		if err != nil {
			return nil, err
		}
		deps = append(deps, dc)
	}
	c.SetDependencies(deps...)
	return &c, nil
}

func callerOf(u *auth.User) events.Caller {
	if u == nil {
		return events.Caller{}
	}
	return events.Caller{User: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
}

// manifestOf is what a stored release applied: its manifest, then its hooks but the test
// hooks, which only `helm test` runs (nil: nothing).
func manifestOf(rel *helmrelease.Release) string {
	if rel == nil {
		return ""
	}
	var b strings.Builder
	b.WriteString(rel.Manifest)
	for _, h := range rel.Hooks {
		if h != nil && !helmexec.IsTestHook(h) {
			fmt.Fprintf(&b, "\n---\n# Source: %s\n%s\n", h.Path, h.Manifest)
		}
	}
	return b.String()
}

// withoutCRDs drops the chart's crds/ files the template render prints first: Helm
// installs them once and never upgrades them, and a release's manifest never holds them
// (helm-diff leaves them out too, unless --include-crds).
func withoutCRDs(rendered string) string {
	lines := strings.SplitAfter(rendered, "\n")
	start, sawCRD := 0, false
	for i, l := range lines {
		if strings.HasPrefix(l, "---") {
			start = i
		}
		src, ok := strings.CutPrefix(l, "# Source: ")
		switch {
		case !ok:
		case strings.HasPrefix(src, "crds/"):
			sawCRD = true
		case !sawCRD:
			return rendered
		default:
			return strings.Join(lines[start:], "")
		}
	}
	if sawCRD {
		return ""
	}
	return rendered
}
