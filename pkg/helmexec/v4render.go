package helmexec

import (
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	common4 "helm.sh/helm/v4/pkg/chart/common"
	util4 "helm.sh/helm/v4/pkg/chart/common/util"
	engine4 "helm.sh/helm/v4/pkg/engine"
	"k8s.io/client-go/rest"
)

// The v4 engine renders in the tenant's render worker as the v3 engine does
// (render_out.go): the worker runs Helm v4's engine with Helm v4's capabilities, and Helm
// v4's action runs the frozen chart.

// renderV4 renders ch as Helm v4's install or upgrade does; lookups go through cfg (nil:
// they find nothing).
func renderV4(g GuardRender, ch *chart.Chart, cfg *rest.Config) (map[string]string, error) {
	ch4, err := chartV4(ch)
	if err != nil {
		return nil, err
	}
	rel := common4.ReleaseOptions{Name: g.Release.Name, Namespace: g.Release.Namespace, Revision: g.Release.Revision,
		IsUpgrade: g.Release.IsUpgrade, IsInstall: g.Release.IsInstall}
	vals, err := util4.ToRenderValuesWithSchemaValidation(ch4, g.Values, rel, capsV4(g.Caps), true)
	if err != nil {
		return nil, err
	}
	e := engine4.Engine{}
	if cfg != nil {
		e = engine4.New(cfg)
	}
	return e.Render(ch4, vals)
}

// capsV4 are the capabilities a v4 job carries as Helm v4's, with Helm v4's version.
func capsV4(c *chartutil.Capabilities) *common4.Capabilities {
	if c == nil {
		return common4.DefaultCapabilities.Copy()
	}
	return &common4.Capabilities{APIVersions: common4.VersionSet(c.APIVersions),
		KubeVersion: common4.KubeVersion{Version: c.KubeVersion.Version, Major: c.KubeVersion.Major, Minor: c.KubeVersion.Minor},
		HelmVersion: common4.DefaultCapabilities.HelmVersion}
}
