package submitter

import (
	"context"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/api"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
)

// chartRef is the chart an install or upgrade fetches, its basic auth Secret resolved as
// the console resolves it (UpgradeReleaseAsync): the one the request names, else for an
// upgrade by chart_url the one its release recorded (helm.openshift.io/auth-secret), unless
// NoneSecret clears it. An upgrade of a noRepo release stays noRepo. The recorded name is
// the tenant's (release records are hostile input): it is read for the caller only, as a
// named one is.
func chartRef(req api.ReleaseRequest, base *helmrelease.Release) chartref.Ref {
	ref := req.Chart()
	if base == nil || req.ChartURL == "" || req.IndexEntry != "" {
		return ref
	}
	recorded := chartref.RecordedURLInstall(base.Chart)
	ref.NoRepo = ref.NoRepo || recorded.Installation == chartref.InstallationURL
	switch req.BasicAuthSecretName {
	case chartref.NoneSecret:
		ref.AuthSecret = ""
	case "":
		ref.AuthSecret = recorded.AuthSecret
	default:
		ref.AuthSecret = req.BasicAuthSecretName
	}
	return ref
}

// withCaller carries the caller to the chart source: a basic auth Secret is read for them
// only (an empty caller, authentication off, reads as submit).
func withCaller(ctx context.Context, c events.Caller) context.Context {
	return chartsource.WithCaller(ctx, chartsource.Caller{User: c.User, UID: c.UID, Groups: c.Groups, Extra: c.Extra})
}
