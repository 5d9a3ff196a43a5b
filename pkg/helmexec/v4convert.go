package helmexec

import (
	"encoding/json"
	"fmt"
	"maps"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	helmrelease "helm.sh/helm/v3/pkg/release"
	common4 "helm.sh/helm/v4/pkg/chart/common"
	util4 "helm.sh/helm/v4/pkg/chart/common/util"
	chart4 "helm.sh/helm/v4/pkg/chart/v2"
	engine4 "helm.sh/helm/v4/pkg/engine"
	release4 "helm.sh/helm/v4/pkg/release/v1"
	"k8s.io/client-go/rest"
)

// The executor, the store and the events speak Helm v3's types; the v4 engine converts at
// its edges. A release converts through its JSON, the storage format both Helms share (its
// chart loses its subcharts there, as in every stored record); a chart to install converts
// field by field, its subcharts with it.

// releaseV4 is a Helm v3 release as Helm v4's.
func releaseV4(r *helmrelease.Release) (*release4.Release, error) {
	if r == nil {
		return nil, nil
	}
	var out release4.Release
	if err := viaJSON(r, &out); err != nil {
		return nil, fmt.Errorf("convert release %s v%d for helm v4: %w", r.Name, r.Version, err)
	}
	out.Labels = maps.Clone(r.Labels)
	return &out, nil
}

// releaseV3 is a Helm v4 release as Helm v3's (apply_method and the rollback revision are
// the v4Driver's to keep).
func releaseV3(r *release4.Release) (*helmrelease.Release, error) {
	if r == nil {
		return nil, nil
	}
	var out helmrelease.Release
	if err := viaJSON(r, &out); err != nil {
		return nil, fmt.Errorf("convert release %s v%d from helm v4: %w", r.Name, r.Version, err)
	}
	out.Labels = maps.Clone(r.Labels)
	return &out, nil
}

// chartV4 is a Helm v3 chart, with its subcharts, as Helm v4's.
func chartV4(c *chart.Chart) (*chart4.Chart, error) {
	if c == nil {
		return nil, nil
	}
	out := &chart4.Chart{Raw: filesV4(c.Raw), Templates: filesV4(c.Templates), Files: filesV4(c.Files),
		Values: c.Values, Schema: c.Schema}
	if err := viaJSON(c.Metadata, &out.Metadata); err != nil {
		return nil, fmt.Errorf("convert chart metadata: %w", err)
	}
	if err := viaJSON(c.Lock, &out.Lock); err != nil {
		return nil, fmt.Errorf("convert chart lock: %w", err)
	}
	for _, d := range c.Dependencies() {
		d4, err := chartV4(d)
		if err != nil {
			return nil, err
		}
		out.AddDependency(d4)
	}
	return out, nil
}

func filesV4(in []*chart.File) []*common4.File {
	if in == nil {
		return nil
	}
	out := make([]*common4.File, len(in))
	for i, f := range in {
		if f != nil {
			out[i] = &common4.File{Name: f.Name, Data: f.Data}
		}
	}
	return out
}

// viaJSON copies in into out (a pointer to a pointer) through JSON; nil stays nil.
func viaJSON(in, out any) error {
	raw, err := json.Marshal(in)
	if err != nil {
		return err
	}
	if string(raw) == "null" {
		return nil
	}
	return json.Unmarshal(raw, out)
}

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
