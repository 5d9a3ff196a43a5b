package ref

import (
	"helm.sh/helm/v3/pkg/chart"
)

// The chart annotations the console writes into a release's chart installed by URL outside
// any repository (openshift/console pkg/helm/actions): an upgrade finds its Secret there.
const (
	AnnotationChartURL     = "chart_url"
	AnnotationInstallation = "installation"
	InstallationURL        = "url_install"
	AnnotationAuthSecret   = "helm.openshift.io/auth-secret"
)

// URLInstall is what a chart by URL records in its chart's annotations.
type URLInstall struct {
	ChartURL, Installation, AuthSecret string
}

// Annotations are the annotations u writes (none when it is empty).
func (u URLInstall) Annotations() map[string]string {
	out := map[string]string{}
	for k, v := range map[string]string{AnnotationChartURL: u.ChartURL, AnnotationInstallation: u.Installation, AnnotationAuthSecret: u.AuthSecret} {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// Annotate writes u's annotations into a chart the caller owns (not a shared one).
func (u URLInstall) Annotate(ch *chart.Chart) {
	ann := u.Annotations()
	if ch == nil || len(ann) == 0 {
		return
	}
	if ch.Metadata == nil {
		ch.Metadata = &chart.Metadata{}
	}
	if ch.Metadata.Annotations == nil {
		ch.Metadata.Annotations = map[string]string{}
	}
	for k, v := range ann {
		ch.Metadata.Annotations[k] = v
	}
}

// RecordedURLInstall is what a stored release's chart recorded.
func RecordedURLInstall(ch *chart.Chart) URLInstall {
	if ch == nil || ch.Metadata == nil {
		return URLInstall{}
	}
	a := ch.Metadata.Annotations
	return URLInstall{ChartURL: a[AnnotationChartURL], Installation: a[AnnotationInstallation], AuthSecret: a[AnnotationAuthSecret]}
}
