package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	chartrepos "github.com/async-helm/async-helm/pkg/chart/repos"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/function"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/submitter"
	"github.com/async-helm/async-helm/pkg/verify"
)

// chartRoutes serve the console's chart routes (the merged index, one chart, a dry-run
// render) from the same repositories, address policy and chart cache as install.
type chartRoutes struct {
	repos  *chartrepos.Set
	source *chartsource.Source
	// Any valid token may call the chart and template routes: each caller has a bucket,
	// and renders run in children killed at their deadline.
	limits   *chartsource.CallerLimits
	renderer *helmexec.Renderer
	// renders share the render slots between callers and namespaces.
	renders *chartsource.RenderSlots
}

// startCharts watches the chart repositories and makes them the source's.
func (f *Function) startCharts(ctx context.Context, cfg *rest.Config, src *chartsource.Source) error {
	set, err := chartrepos.Open(ctx, cfg, src, chartrepos.OpenOptions{Index: chartrepos.WithIndex, Refresh: f.cfg.ChartIndexRefresh, Log: f.log})
	if err != nil {
		return fmt.Errorf("chart repositories: %w", err)
	}
	src.Repos = set
	set.SetIndexBudget(f.cfg.ChartIndexCacheBytes, f.cfg.ChartIndexMaxBytes)
	if err := f.readAuthSecrets(cfg, src); err != nil {
		return err
	}
	rs := f.cfg.RouteSettings
	f.charts = &chartRoutes{repos: set, source: src, limits: rs.Limits(), renders: rs.RenderSlots(),
		renderer: &helmexec.Renderer{Limits: helmexec.RenderLimits{Timeout: rs.TemplateRenderTimeout,
			MaxMemoryBytes: rs.TemplateRenderMaxMiB << 20, MaxParallel: rs.TemplateRenderMaxParallel}}}
	f.registerShares(f.charts.renders, src)
	return nil
}

// maxChartAnswerBytes bounds a chart the chart route answers (archive and what it unpacks
// to): its JSON is built whole in memory, for any caller.
const maxChartAnswerBytes = 16 << 20

// maxRefChars bounds each part of a chart reference in a query (real ones are far shorter).
const maxRefChars = 2048

// admit takes a token of the caller's bucket, one per tenant share (a namespace's
// ServiceAccounts share one); without one it is a 429 with Retry-After.
func (f *Function) admit(r *http.Request) error {
	caller := ""
	if u := userFrom(r.Context()); u != nil {
		caller = auth.ShareName(u.Name)
	}
	if ok, retry := f.charts.limits.Allow(caller); !ok {
		return &function.StatusError{Code: http.StatusTooManyRequests, RetryAfter: retry,
			Err: fmt.Errorf("too many chart requests by %q: retry after %s", caller, retry.Round(time.Millisecond))}
	}
	return nil
}

func (f *Function) routeCharts(route routeFunc) {
	route("GET "+api.PathChartIndex, f.chartIndex)
	route("GET "+api.PathChart, f.chartGet)
	route("POST "+api.PathTemplate, f.template)
	f.routeVerify(route, verify.Unavailable{Reason: verify.Reason})
}

// readAuthSecrets makes src read the basic auth Secret of a chart by URL (noRepo,
// basic_auth_secret_name) for the caller: an access review of the caller's right to get
// it, then a read with submit's own rights (as for project repository credentials).
func (f *Function) readAuthSecrets(cfg *rest.Config, src *chartsource.Source) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fmt.Errorf("basic auth secrets client: %w", err)
	}
	r := chartrepos.ReviewedAuthSecrets{Client: client}
	if f.authz != nil {
		r.MayGet = func(ctx context.Context, c chartsource.Caller, namespace, name string) error {
			u := &auth.User{Name: c.User, UID: c.UID, Groups: c.Groups, Extra: c.Extra}
			return f.authz.Check(ctx, u, auth.Need{Verb: "get", Resource: "secrets", Namespace: namespace, Name: name})
		}
	}
	src.AuthSecrets = r
	return nil
}

// asCaller carries the request's caller to the chart source (a basic auth Secret is read
// for them only; authentication off: as submit).
func asCaller(ctx context.Context) context.Context {
	return chartsource.WithCaller(ctx, callerOf(userFrom(ctx)))
}

// callerOf is the chart source's caller of u (nil: submit itself).
func callerOf(u *auth.User) chartsource.Caller {
	if u == nil {
		return chartsource.Caller{}
	}
	return chartsource.Caller{User: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra}
}

// mayUseRepositoriesOf checks the caller may read namespace's releases: its project
// repositories (and the credentials they carry) serve only those who work there.
func (f *Function) mayUseRepositoriesOf(ctx context.Context, namespace string) error {
	if namespace == "" || f.authz == nil || userFrom(ctx) == nil {
		return nil
	}
	return f.authz.Check(ctx, userFrom(ctx), auth.Need{Verb: "list", Resource: "secrets", Namespace: namespace})
}

// chartIndex answers the merged index.yaml of the cluster's, the namespace's and
// CHART_REPOSITORIES' repositories, from the background cache.
func (f *Function) chartIndex(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	ns := q.Get("namespace")
	onlyCompatible := true // the console's default
	if v := q.Get("onlyCompatible"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return fmt.Errorf("%w: onlyCompatible is true or false, not %q", submitter.ErrInvalid, v)
		}
		onlyCompatible = b
	}
	if err := f.mayUseRepositoriesOf(r.Context(), ns); err != nil {
		return err
	}
	// The caller travels with the index's fetches: they take the caller's share of the slots.
	out, err := f.charts.repos.IndexYAML(asCaller(r.Context()), ns, chartrepos.IndexOptions{
		OnlyCompatible: onlyCompatible, Admit: func() error { return f.admit(r) }})
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/yaml")
	w.Header().Set("Cache-Control", "no-store, must-revalidate")
	_, _ = w.Write(out)
	return nil
}

// chartGet answers one chart as the console's /api/helm/chart does: Helm's chart as JSON
// (metadata, lock, templates, values, schema, files). ?url= and/or ?indexEntry= name it,
// ?namespace= the project repositories it may come from, ?version= a version;
// ?noRepo=true&url= a chart outside the repositories, fetched with the basic auth of
// ?basic_auth_secret_name= (a Secret of ?namespace=, "default" when none is named).
func (f *Function) chartGet(w http.ResponseWriter, r *http.Request) error {
	if err := f.admit(r); err != nil {
		return err
	}
	ref, err := chartQuery(r)
	if err != nil {
		return err
	}
	// A chart outside the repositories uses none of the namespace's (its Secret, if any,
	// is read for the caller).
	if !ref.NoRepo {
		if err := f.mayUseRepositoriesOf(r.Context(), ref.Namespace); err != nil {
			return err
		}
	}
	c, err := f.charts.source.Get(asCaller(r.Context()), ref)
	if err != nil {
		return err
	}
	if c.Size() > maxChartAnswerBytes {
		return function.WithStatus(http.StatusUnprocessableEntity, fmt.Errorf("%s holds more than %d MiB: too large to answer as JSON",
			ref, maxChartAnswerBytes>>20))
	}
	// The cached chart is shared and read-only; encoding only reads it.
	function.WriteJSON(w, http.StatusOK, c.Loaded)
	return nil
}

// template renders what an install of the request would create, without a cluster or a
// reservation, and answers the console's shape: the manifests as text/yaml.
func (f *Function) template(w http.ResponseWriter, r *http.Request) error {
	if err := f.admit(r); err != nil {
		return err
	}
	var req api.ReleaseRequest
	if err := decode(w, r, &req); err != nil {
		return err
	}
	if err := req.Validate(true); err != nil {
		return fmt.Errorf("%w: %v", submitter.ErrInvalid, err)
	}
	if err := f.mayUseRepositoriesOf(r.Context(), req.Namespace); err != nil {
		return err
	}
	c, err := f.charts.source.Get(asCaller(r.Context()), req.Chart())
	if err != nil {
		return err
	}
	ctx, done, err := diffRenderer{f.charts}.Slot(r.Context(), userFrom(r.Context()), req.Namespace)
	if err != nil {
		return err
	}
	defer done()
	out, err := diffRenderer{f.charts}.Render(ctx, helmexec.ChartRender{Namespace: req.Namespace, Name: req.Name,
		Archive: c.Data, Values: req.Values})
	if err != nil {
		return fmt.Errorf("render %s: %w", req.Chart(), err)
	}
	w.Header().Set("Content-Type", "text/yaml")
	_, _ = w.Write([]byte(out))
	return nil
}

// chartQuery reads the chart route's query as the console's HandleChartGet does.
func chartQuery(r *http.Request) (chartsource.Ref, error) {
	q := r.URL.Query()
	ref := chartsource.Ref{URL: q.Get("url"), IndexEntry: q.Get("indexEntry"), Version: q.Get("version"), Namespace: q.Get("namespace")}
	if len(ref.URL) > maxRefChars || len(ref.IndexEntry) > maxRefChars || len(ref.Version) > maxRefChars {
		return ref, fmt.Errorf("%w: url, indexEntry and version are at most %d characters", submitter.ErrInvalid, maxRefChars)
	}
	if q.Get("noRepo") == "true" {
		if ref.URL == "" {
			return ref, fmt.Errorf("%w: chart URL is required", submitter.ErrInvalid)
		}
		ref.NoRepo, ref.IndexEntry, ref.AuthSecret = true, "", q.Get("basic_auth_secret_name")
		switch {
		case ref.AuthSecret == "":
			// The chart is the URL's: charged to its caller alone, never to a namespace the
			// caller names but was not reviewed for.
			ref.Namespace = ""
		case ref.Namespace == "":
			ref.Namespace = "default" // the console's default namespace
		}
		return ref, nil
	}
	if ref.URL == "" && ref.IndexEntry == "" {
		return ref, fmt.Errorf("%w: query parameter url or indexEntry is required", submitter.ErrInvalid)
	}
	return ref, nil
}
