package helmexec

import (
	"fmt"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/releaseutil"
)

// RevisionRender is what an install (revision 1) or an upgrade to Revision would apply,
// rendered as Helm's action renders it without a cluster: .Release.Revision, .Release.IsInstall
// and .Release.IsUpgrade as the action sets them (a dry-run install, Render, always renders
// revision 1 as an install, which an upgrade's diff cannot use).
type RevisionRender struct {
	Namespace, Name string
	Revision        int
	Upgrade         bool
	// Chart is consumed (Helm mutates it): pass a private copy.
	Chart  *chart.Chart
	Values map[string]any
	// KubeVersion is the cluster's ("v1.37.2"); Helm's default when empty.
	KubeVersion string
}

// RenderRevision renders r and prints it as Render does: the chart's CRDs, the manifest, then
// the hooks the action runs, each "---\n# Source: <path>". Test hooks are left out: only
// `helm test` runs them.
func RenderRevision(r RevisionRender) (string, error) {
	caps := chartutil.DefaultCapabilities.Copy()
	if r.KubeVersion != "" {
		kv, err := chartutil.ParseKubeVersion(r.KubeVersion)
		if err != nil {
			return "", fmt.Errorf("kube version %q: %w", r.KubeVersion, err)
		}
		caps.KubeVersion = *kv
	}
	if want := r.Chart.Metadata.KubeVersion; want != "" && !chartutil.IsCompatibleRange(want, caps.KubeVersion.String()) {
		return "", fmt.Errorf("chart requires kubeVersion: %s which is incompatible with Kubernetes %s", want, caps.KubeVersion.String())
	}
	skip, err := skipSchemaValidation(r.Chart)
	if err != nil {
		return "", err
	}
	if err := chartutil.ProcessDependenciesWithMerge(r.Chart, r.Values); err != nil {
		return "", err
	}
	opts := chartutil.ReleaseOptions{Name: r.Name, Namespace: r.Namespace, Revision: max(r.Revision, 1),
		IsInstall: !r.Upgrade, IsUpgrade: r.Upgrade}
	vals, err := chartutil.ToRenderValuesWithSchemaValidation(r.Chart, r.Values, opts, caps, skip)
	if err != nil {
		return "", err
	}
	files, err := engine.Engine{}.Render(r.Chart, vals)
	if err != nil {
		return "", err
	}
	for k := range files {
		if strings.HasSuffix(k, "NOTES.txt") {
			delete(files, k)
		}
	}
	hooks, manifests, err := releaseutil.SortManifests(files, nil, releaseutil.InstallOrder)
	if err != nil {
		return "", err
	}
	return printRevision(r.Chart, manifests, hooks), nil
}

// printRevision prints the CRDs of ch, the manifests and the hooks that are not tests.
func printRevision(ch *chart.Chart, manifests []releaseutil.Manifest, hooks []*helmrelease.Hook) string {
	var b strings.Builder
	for _, crd := range ch.CRDObjects() {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", crd.Name, crd.File.Data)
	}
	for _, m := range manifests {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", m.Name, m.Content)
	}
	for _, h := range hooks {
		if !IsTestHook(h) {
			fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
		}
	}
	return b.String()
}

// IsTestHook reports a hook only `helm test` runs (helm.sh/hook: test, or Helm 2's
// test-success, and no other event): an install, upgrade or rollback never applies it.
func IsTestHook(h *helmrelease.Hook) bool {
	return h != nil && len(h.Events) > 0 &&
		!slices.ContainsFunc(h.Events, func(e helmrelease.HookEvent) bool { return e != helmrelease.HookTest })
}
