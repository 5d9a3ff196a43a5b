package helmexec

import (
	"context"
	"fmt"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
)

// RenderRequest is a dry run of an install: what the chart would create.
type RenderRequest struct {
	Namespace, Name string
	// Chart is consumed (Helm mutates it): pass a private copy, and check its dependencies
	// (CheckDependencies) on another.
	Chart  *chart.Chart
	Values map[string]any
	// KubeVersion is the cluster's ("v1.37.2"); Helm's default when empty.
	KubeVersion string
}

// Render renders an install without a cluster (`helm template`: Install with DryRun and
// ClientOnly) and prints it as the console's /api/helm/template does: the chart's CRDs, the
// manifest, then the hooks, each "---\n# Source: <path>".
func Render(ctx context.Context, req RenderRequest) (string, error) {
	cfg := &action.Configuration{Log: func(string, ...any) {}}
	i := action.NewInstall(cfg)
	i.DryRun, i.ClientOnly = true, true
	i.Replace = true // no release storage to check the name against
	i.ReleaseName, i.Namespace = req.Name, req.Namespace
	var err error
	if i.SkipSchemaValidation, err = skipSchemaValidation(req.Chart); err != nil {
		return "", err
	}
	if req.KubeVersion != "" {
		kv, err := chartutil.ParseKubeVersion(req.KubeVersion)
		if err != nil {
			return "", fmt.Errorf("kube version %q: %w", req.KubeVersion, err)
		}
		i.KubeVersion = kv
	}
	rel, err := i.RunWithContext(ctx, req.Chart, req.Values)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	for _, f := range rel.Chart.CRDs() {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", f.Name, f.Data)
	}
	fmt.Fprintln(&b, strings.TrimSpace(rel.Manifest))
	for _, h := range rel.Hooks {
		fmt.Fprintf(&b, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
	return b.String(), nil
}
