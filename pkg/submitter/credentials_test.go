package submitter

import (
	"context"
	"errors"
	"testing"

	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"helm.sh/helm/v3/pkg/chart"

	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/release"
)

// repoSecrets names Secret x for every chart of the "exfil" repository.
type repoSecrets struct{}

func (repoSecrets) CredentialSecrets(ns, entry, url string) ([]string, error) {
	if entry == "web--exfil" {
		return []string{"x"}, nil
	}
	return nil, nil
}

// countingCharts records every fetch.
type countingCharts struct{ fetched []chartref.Ref }

func (c *countingCharts) Get(_ context.Context, ref chartref.Ref) (*chartsource.Chart, error) {
	c.fetched = append(c.fetched, ref)
	return &chartsource.Chart{Digest: "d", Loaded: &chart.Chart{Metadata: &chart.Metadata{Name: "web", Version: "1.0.0", APIVersion: "v2"}}}, nil
}

// What an editor obtains from a ProjectHelmChartRepository naming Secret x: one who may
// write release records but not get x is refused before anything is fetched (x's
// contents never reach the repository's server); one who may get x installs.
func TestChartFromRepositoryWithCredentialsNeedsTheirReadRight(t *testing.T) {
	e := newEnv(t)
	c := &countingCharts{}
	e.svc.Charts, e.svc.RepoSecrets = c, repoSecrets{}
	a := &authz{allow: map[auth.Need]bool{
		{Verb: "create", Resource: "secrets", Namespace: "ns"}: true,
		{Verb: "update", Resource: "secrets", Namespace: "ns"}: true}}
	e.svc.Authorizer = a
	req := install("web")
	req.ChartURL, req.IndexEntry, req.ChartVersion = "", "web--exfil", "1.0.0"
	u := &auth.User{Name: "editor"}
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, req, u); !errors.Is(err, auth.ErrForbidden) {
		t.Fatalf("install from a repository whose Secret the caller may not get: %v", err)
	}
	if len(c.fetched) != 0 || len(e.secrets()) != 0 {
		t.Errorf("refused, yet %d fetches and %d reservations", len(c.fetched), len(e.secrets()))
	}
	a.allow[auth.Need{Verb: "get", Resource: "secrets", Namespace: "ns", Name: "x"}] = true
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, req, u); err != nil {
		t.Fatalf("with get on secret x: %v", err)
	}
	if len(c.fetched) != 1 {
		t.Errorf("%d fetches, want 1", len(c.fetched))
	}
}
