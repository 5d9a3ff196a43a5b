package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"go.uber.org/zap"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/actionlog"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	chartrepos "github.com/async-helm/async-helm/pkg/chart/repos"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/fairqueue"
	"github.com/async-helm/async-helm/pkg/function"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/ledger"
	"github.com/async-helm/async-helm/pkg/reader"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/lease"
	"github.com/async-helm/async-helm/pkg/signing"
	"github.com/async-helm/async-helm/pkg/submitter"
	"github.com/async-helm/async-helm/pkg/valuesfrom"
)

// Function is submit: the write side (install, upgrade) and the read side (list, get).
type Function struct {
	cfg     Config
	log     *zap.SugaredLogger
	metrics *function.Metrics
	svc     *submitter.Service
	reads   *reader.Service
	authn   *auth.Authenticator
	authz   *auth.Authorizer
	events  http.Handler
	charts  *chartRoutes
	logs    *actionlog.Reader
	handoff *events.Handoff // nil: every send on the request's path
	// room holds the requests in flight (inflight.go).
	room *fairqueue.Bytes
}

// New builds submit from its configuration; Start opens its clients.
func New(cfg Config, log *zap.SugaredLogger, metrics *function.Metrics) *Function {
	return &Function{cfg: cfg, log: log, metrics: metrics, room: fairqueue.NewBytes(maxInFlightBytes)}
}

// Start connects to the cluster and syncs the namespace cache.
func (f *Function) Start(ctx context.Context) error {
	// No client-side bucket on the path to 201 (kube.Unlimited): the API server's fairness is the limit.
	cl, err := kube.Open(f.cfg.Kubeconfig, kube.Unlimited)
	if err != nil {
		return err
	}
	sender, err := f.openSender()
	if err != nil {
		return err
	}
	helm, err := helmexec.NewFactory(cl.Config)
	if err != nil {
		return err
	}
	c, err := f.openCaches(ctx, cl)
	if err != nil {
		return err
	}
	if err := f.openAuth(cl); err != nil {
		return err
	}
	charts, err := chartrepos.NewSource(ctx, f.cfg.Settings, cl.Typed, f.cfg.ChartCacheTTL, time.Minute)
	if err != nil {
		return err
	}
	if err := f.startCharts(ctx, cl.Config, charts); err != nil {
		return err
	}
	store := &release.Store{Client: cl.Typed, Metadata: cl.Metadata, Revisions: c.revisions, SealKey: signing.Key(f.cfg.EventSigningKey)}
	f.svc = &submitter.Service{
		Store:      store,
		Charts:     charts,
		Sender:     sender,
		Namespaces: c.namespaces,
		SigningKey: signing.Key(f.cfg.EventSigningKey),
		Ledger:     c.ledger, MaxQueued: f.cfg.MaxQueued, MaxQueuedPerNamespace: f.cfg.MaxQueuedPerNamespace,
		MaxRetained: f.cfg.MaxRetained,
		// A cancel's Lease outlives the few calls that fail the revision and delete it.
		Heartbeat: &lease.Heartbeat{Client: cl.Typed, Holder: "submit", Duration: time.Hour, CancelKey: signing.Key(f.cfg.EventSigningKey)},
		LeaseAlive: func(ctx context.Context, namespace, key string) (bool, error) {
			return lease.Alive(ctx, cl.Typed, namespace, key, time.Now())
		},
		// One compiled values schema per chart digest, as many as the chart cache is likely to hold.
		Schemas: submitter.NewSchemas(256),
		// A chart from a project repository with credentials needs the caller's right to
		// read them.
		RepoSecrets: f.charts.repos,
		// A request that will not run from its delivery (unsent, cancelled while queued) is
		// bound to its reservation's UID where tenants cannot write.
		Bindings: &consumed.Store{Client: cl.Typed, Namespace: f.cfg.Namespace},
		// values_from is read with submit's rights after the caller's access review.
		ValuesObjects: valuesfrom.KubeReader{Client: cl.Typed},
	}
	f.svc.Render = diffRenderer{f.charts} // a diff renders under the template route's bounds
	f.wireReads(helm, store, c)
	f.events = function.EventHandler(f.errorAnswers().Events(f.receive))
	f.logs = f.newLogReader(cl.Typed)
	return nil
}

// wireReads builds the read side beside the write side f.svc, and gives both the
// authorizer and the metrics.
func (f *Function) wireReads(helm *helmexec.Factory, store *release.Store, c *caches) {
	queue := c.ledger.Book
	// The all-namespaces list reviews and lists only the caller's namespaces.
	f.reads = &reader.Service{Helm: helm, Progress: store, Log: f.log, Secrets: store, Index: store,
		Queue: &reader.Queue{Index: queue}, Namespaces: c.revisions}
	if f.authz != nil { // a nil *Authorizer in the interface would not read as "no authorization"
		f.svc.Authorizer, f.reads.Authorizer = f.authz, f.authz
	}
	if f.metrics != nil {
		submitter.ObserveSteps(f.svc, f.metrics.StepDone)
		f.metrics.Registry.MustRegister(ledger.NewQueueMetrics(queue))
	}
}

// caches are the views submit answers from, fed by informers: the path to 201 makes one
// API call, the reservation's create.
type caches struct {
	namespaces corelisters.NamespaceLister
	revisions  *release.RevisionIndex
	ledger     *ledger.Ledger
}

// openCaches starts the namespaces', the release history's and the ledger's informers and
// waits until they are synced.
func (f *Function) openCaches(ctx context.Context, cl *kube.Clients) (*caches, error) {
	inf := informers.NewSharedInformerFactory(cl.Typed, 0)
	nsLister := inf.Core().V1().Namespaces().Lister()
	revisions, err := release.NewRevisionIndex(cl.Metadata)
	if err != nil {
		return nil, err
	}
	// Admission counts the ledger, in async-helm's namespace, per tenant.
	// A consumed record counts as retained for as long as the sweeper keeps it.
	book := ledger.NewBook(f.cfg.QueueDeadline+f.cfg.LedgerGrace, nil)
	book.Retain = f.cfg.EventMaxAge + time.Hour
	books := &ledger.Ledger{Store: &ledger.Store{Client: cl.Typed, Namespace: f.cfg.Namespace}, Book: book}
	if err := books.ClearDeletedNamespaces(inf.Core().V1().Namespaces().Informer()); err != nil {
		return nil, err
	}
	inf.Start(ctx.Done())
	for typ, ok := range inf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("cache of %v did not sync", typ)
		}
	}
	if err := revisions.Run(ctx); err != nil {
		return nil, err
	}
	if err := books.Run(ctx); err != nil {
		return nil, err
	}
	return &caches{namespaces: nsLister, revisions: revisions, ledger: books}, nil
}

// openSender is the sender to K_SINK: behind the 201 while the sink answers when SEND_QUEUE
// is set (docs/design.md, "The reservation contract").
func (f *Function) openSender() (submitter.EventSender, error) {
	sink, err := function.NewSender(f.cfg.SinkConfig, f.metrics)
	if err != nil || f.cfg.SendQueue <= 0 {
		return sink, err
	}
	f.handoff = events.NewHandoff(sink, events.HandoffOptions{Queue: f.cfg.SendQueue, Workers: f.cfg.SendWorkers, Log: f.log})
	return f.handoff, nil
}

// openAuth builds the authenticator and authorizer, unless AUTHENTICATION is off.
func (f *Function) openAuth(cl *kube.Clients) error {
	if !f.cfg.Authentication {
		f.log.Warnw("AUTHENTICATION=false: every caller acts as submit's and executor's own service accounts")
		return nil
	}
	// TokenReviews get a client of their own (its own rate limiter): anyone who reaches
	// submit can send unknown tokens, and their reviews must not queue the reservations.
	reviewCfg := rest.CopyConfig(cl.Config)
	reviewCfg.QPS, reviewCfg.Burst = kube.Raised.QPS, kube.Raised.Burst
	reviews, err := kubernetes.NewForConfig(reviewCfg)
	if err != nil {
		return fmt.Errorf("token review client: %w", err)
	}
	f.authn = &auth.Authenticator{Client: reviews}
	f.authz = &auth.Authorizer{Client: cl.Typed}
	return nil
}

// Drain sends the events queued behind their 201 before submit exits (function.Service).
func (f *Function) Drain(ctx context.Context) {
	if f.handoff != nil {
		f.handoff.Drain(ctx)
	}
}

// Handler routes the console's helm API; every route returns its error to the one adapter
// of errors.go.
func (f *Function) Handler() http.Handler {
	mux := http.NewServeMux()
	route := f.router(mux)
	route("POST "+api.PathAsync, f.submit(release.ActionInstall))
	route("PUT "+api.PathAsync, f.submit(release.ActionUpgrade))
	route("DELETE "+api.PathAsync, f.uninstallAsync)
	route("PATCH "+api.PathAsync, f.rollbackAsync)
	// The console's synchronous routes, answered through the same async path.
	route("POST "+api.PathRelease, f.submitSync(release.ActionInstall))
	route("PUT "+api.PathRelease, f.submitSync(release.ActionUpgrade))
	route("PATCH "+api.PathRelease, f.rollbackSync)
	route("DELETE "+api.PathRelease, f.uninstallSync)
	route("GET "+api.PathList, f.list)
	route("GET "+api.PathRelease, f.get)
	route("GET "+api.PathHistory, f.history)
	route("POST "+api.PathCancel, f.cancel)
	// Events answer as CloudEvents (function.EventHandler), through the same statusOf.
	route("POST "+api.PathEvents, func(w http.ResponseWriter, r *http.Request) error {
		f.events.ServeHTTP(w, r)
		return nil
	})
	f.routeCharts(route)
	f.routeLog(route)
	f.routeDiff(route)
	mux.HandleFunc("GET /healthz", function.Healthz(f.events))
	return mux
}

// routeFunc registers a route of the API.
type routeFunc func(pattern string, h function.HandlerFunc)

// router registers routes on mux behind authentication and the one error adapter.
func (f *Function) router(mux *http.ServeMux) routeFunc {
	answers := f.errorAnswers()
	return func(pattern string, h function.HandlerFunc) {
		mux.HandleFunc(pattern, answers.Func(f.authenticated(f.inFlight(h))))
	}
}

// submit answers an install or upgrade request: 201 with the reserved Secret and its status URL.
func (f *Function) submit(action release.Action) function.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		req, acc, err := f.acceptSubmit(w, r, action)
		if err != nil {
			return err
		}
		f.log.Infow("accepted", "action", action, "namespace", req.Namespace, "release", req.Name,
			"revision", acc.Revision, "requestId", acc.RequestID)
		w.Header().Set("Location", statusURL(req.Namespace, req.Name))
		function.WriteJSON(w, http.StatusCreated, acc.Secret)
		return nil
	}
}

// acceptSubmit reserves an install's or upgrade's revision (the async and the sync route
// alike).
func (f *Function) acceptSubmit(w http.ResponseWriter, r *http.Request, action release.Action) (api.ReleaseRequest, *submitter.Accepted, error) {
	var req api.ReleaseRequest
	if err := decode(w, r, &req); err != nil {
		return req, nil, err
	}
	acc, err := f.svc.Submit(r.Context(), action, req, userFrom(r.Context()))
	return req, acc, err
}

// receive serves request events from pipelines with the same answers as the HTTP API.
func (f *Function) receive(ctx context.Context, e cloudevents.Event) (function.EventReply, error) {
	action, req, err := events.ParseRequested(e)
	if err != nil {
		return function.EventReply{}, function.WithStatus(http.StatusBadRequest, err)
	}
	acc, err := f.svc.Submit(ctx, action, req, userFrom(ctx))
	if err != nil {
		return function.EventReply{}, err
	}
	reply := cloudevents.NewEvent()
	reply.SetID(acc.RequestID)
	reply.SetSource(events.SourceSubmit)
	reply.SetType(events.TypeReserved)
	reply.SetSubject(events.Subject(req.Namespace, req.Name))
	reply.SetExtension(events.ExtRevision, acc.Revision)
	reply.SetExtension(events.ExtRequestID, acc.RequestID)
	if err := reply.SetData(cloudevents.ApplicationJSON, acc.Secret); err != nil {
		return function.EventReply{}, function.WithStatus(http.StatusInternalServerError, err)
	}
	return function.EventReply{Event: &reply, Result: cloudevents.NewHTTPResult(http.StatusCreated, "reserved %s", acc.Secret.Name)}, nil
}

// cancel stops the pending revision of ?ns=&name=: 202 while its executor stops, 200 when
// it was failed at once, 409 when nothing is pending.
func (f *Function) cancel(w http.ResponseWriter, r *http.Request) error {
	ns, name, err := nsAndName(r)
	if err != nil {
		return err
	}
	out, err := f.svc.Cancel(r.Context(), ns, name, userFrom(r.Context()))
	if err != nil {
		return err
	}
	f.log.Infow("cancel", "namespace", ns, "release", name, "revision", out.Revision, "status", out.Status)
	code := http.StatusAccepted
	if out.Status == "failed" {
		code = http.StatusOK
	}
	function.WriteJSON(w, code, out)
	return nil
}

// nsAndName reads the required ?ns=&name= (400 without them).
func nsAndName(r *http.Request) (string, string, error) {
	q := r.URL.Query()
	if q.Get("ns") == "" || q.Get("name") == "" {
		return "", "", fmt.Errorf("%w: query parameters ns and name are required", submitter.ErrInvalid)
	}
	return q.Get("ns"), q.Get("name"), nil
}

// statusURL is where a 201's release can be read (its Location).
func statusURL(ns, name string) string {
	return api.PathRelease + "?" + url.Values{"ns": {ns}, "name": {name}}.Encode()
}

// decode reads a JSON body of at most api.MaxBodyBytes into v (413 over it or over
// api.MaxValueNodes, 400 when not JSON).
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	body := http.MaxBytesReader(w, r.Body, api.MaxBodyBytes)
	if err := json.NewDecoder(body).Decode(v); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return fmt.Errorf("%w: over %d bytes", errTooLarge, tooLarge.Limit)
		}
		if errors.Is(err, api.ErrTooManyValues) {
			return fmt.Errorf("%w: %w", errTooLarge, err)
		}
		return fmt.Errorf("%w: body is not a JSON release request: %v", submitter.ErrInvalid, err)
	}
	return nil
}

type userKey struct{}

// userFrom is the caller authenticated found (nil without authentication).
func userFrom(ctx context.Context) *auth.User {
	u, _ := ctx.Value(userKey{}).(*auth.User)
	return u
}

// authenticated finds the caller before anything else happens (401/403 otherwise).
func (f *Function) authenticated(next function.HandlerFunc) function.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) error {
		if f.authn == nil {
			return next(w, r)
		}
		u, err := f.authn.Authenticate(r.Context(), r)
		if err != nil {
			return err
		}
		return next(w, r.WithContext(context.WithValue(r.Context(), userKey{}, u)))
	}
}
