package submitter

import (
	"context"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/api"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
)

// chartRef is the chart an install or upgrade fetches, its basic auth Secret resolved as the
// console does: the request's, else for an upgrade by chart_url the one its release
// recorded, unless NoneSecret clears it; a noRepo release stays noRepo. Either is read for
// the caller only (a record is hostile input).
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

// withCaller carries the caller to the chart source, whose Secrets are read for them only.
func withCaller(ctx context.Context, c events.Caller) context.Context {
	return chartsource.WithCaller(ctx, chartsource.Caller{User: c.User, UID: c.UID, Groups: c.Groups, Extra: c.Extra})
}
