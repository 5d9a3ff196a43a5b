package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"go.uber.org/zap"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/chartsource"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/submitter"
)

// Function is submit: the write side (install, upgrade) and the read side (list, get).
type Function struct {
	cfg    Config
	log    *zap.SugaredLogger
	svc    *submitter.Service
	helm   *helmexec.Factory
	events http.Handler
}

// New builds submit from its configuration; Start opens its clients.
func New(cfg Config, log *zap.SugaredLogger) *Function {
	return &Function{cfg: cfg, log: log}
}

// Start connects to the cluster and syncs the namespace cache.
func (f *Function) Start(ctx context.Context) error {
	cl, err := kube.Open(f.cfg.Kubeconfig)
	if err != nil {
		return err
	}
	repos, err := chartsource.ParseRepositories(f.cfg.ChartRepositories)
	if err != nil {
		return err
	}
	sender, err := events.NewSender(f.cfg.SinkConfig, nil)
	if err != nil {
		return err
	}
	if f.helm, err = helmexec.NewFactory(cl.Config); err != nil {
		return err
	}
	// Namespaces and release history are answered from informer caches: the path to 201
	// makes one API call, the reservation's create.
	inf := informers.NewSharedInformerFactory(cl.Typed, 0)
	nsLister := inf.Core().V1().Namespaces().Lister()
	revisions, err := release.NewRevisionIndex(cl.Metadata)
	if err != nil {
		return err
	}
	inf.Start(ctx.Done())
	go revisions.Run(ctx.Done())
	for typ, ok := range inf.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("cache of %v did not sync", typ)
		}
	}
	if !cache.WaitForCacheSync(ctx.Done(), revisions.HasSynced) {
		return fmt.Errorf("cache of release secrets did not sync")
	}
	f.svc = &submitter.Service{
		Store:      &release.Store{Client: cl.Typed, Metadata: cl.Metadata, Revisions: revisions.GetIndexer()},
		Charts:     &chartsource.Source{Repositories: repos, TTL: f.cfg.ChartCacheTTL, HTTP: &http.Client{Timeout: time.Minute}},
		Sender:     sender,
		Namespaces: nsLister,
	}
	p, err := cloudevents.NewHTTP()
	if err != nil {
		return err
	}
	if f.events, err = cloudevents.NewHTTPReceiveHandler(ctx, p, f.receive); err != nil {
		return err
	}
	return nil
}

// Handler routes the console's helm API.
func (f *Function) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+api.PathAsync, f.submit(release.ActionInstall))
	mux.HandleFunc("PUT "+api.PathAsync, f.submit(release.ActionUpgrade))
	mux.HandleFunc("GET "+api.PathList, f.list)
	mux.HandleFunc("GET "+api.PathRelease, f.get)
	mux.HandleFunc("GET "+api.PathHistory, f.history)
	mux.HandleFunc("POST "+api.PathEvents, func(w http.ResponseWriter, r *http.Request) { f.events.ServeHTTP(w, r) })
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })
	return mux
}

func (f *Function) submit(action release.Action) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		var req api.ReleaseRequest
		if err := decode(w, r, &req); err != nil {
			f.fail(w, r, err)
			return
		}
		acc, err := f.svc.Submit(r.Context(), action, req, events.Caller{})
		if err != nil {
			f.fail(w, r, err)
			return
		}
		f.log.Infow("accepted", "action", action, "namespace", req.Namespace, "release", req.Name,
			"revision", acc.Revision, "requestId", acc.RequestID)
		w.Header().Set("Location", statusURL(req.Namespace, req.Name))
		writeJSON(w, http.StatusCreated, acc.Secret)
	}
}

// receive serves request events from pipelines with the same answers as the HTTP API.
func (f *Function) receive(ctx context.Context, e cloudevents.Event) (*cloudevents.Event, cloudevents.Result) {
	action, req, err := events.ParseRequested(e)
	if err != nil {
		return nil, cloudevents.NewHTTPResult(http.StatusBadRequest, "%v", err)
	}
	acc, err := f.svc.Submit(ctx, action, req, events.Caller{})
	if err != nil {
		return nil, cloudevents.NewHTTPResult(statusOf(err), "%v", err)
	}
	reply := cloudevents.NewEvent()
	reply.SetID(acc.RequestID)
	reply.SetSource(events.SourceSubmit)
	reply.SetType(events.TypeReserved)
	reply.SetSubject(events.Subject(req.Namespace, req.Name))
	reply.SetExtension(events.ExtRevision, acc.Revision)
	reply.SetExtension(events.ExtRequestID, acc.RequestID)
	if err := reply.SetData(cloudevents.ApplicationJSON, acc.Secret); err != nil {
		return nil, cloudevents.NewHTTPResult(http.StatusInternalServerError, "%v", err)
	}
	return &reply, cloudevents.NewHTTPResult(http.StatusCreated, "reserved %s", acc.Secret.Name)
}

func (f *Function) list(w http.ResponseWriter, r *http.Request) {
	rels, err := f.helm.List(r.URL.Query().Get("ns"))
	if err != nil {
		f.fail(w, r, err)
		return
	}
	if limit, _ := strconv.ParseBool(r.URL.Query().Get("limitInfo")); limit {
		out := make([]api.ReleaseInfo, 0, len(rels))
		for _, rel := range rels {
			out = append(out, api.Limit(rel))
		}
		writeJSON(w, http.StatusOK, out)
		return
	}
	writeJSON(w, http.StatusOK, rels)
}

func (f *Function) get(w http.ResponseWriter, r *http.Request) {
	ns, name, err := nsAndName(r)
	if err != nil {
		f.fail(w, r, err)
		return
	}
	rel, err := f.helm.Latest(ns, name)
	if err != nil {
		f.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rel)
}

func (f *Function) history(w http.ResponseWriter, r *http.Request) {
	ns, name, err := nsAndName(r)
	if err != nil {
		f.fail(w, r, err)
		return
	}
	rels, err := f.helm.History(ns, name)
	if err != nil {
		f.fail(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, rels)
}

func nsAndName(r *http.Request) (string, string, error) {
	q := r.URL.Query()
	if q.Get("ns") == "" || q.Get("name") == "" {
		return "", "", fmt.Errorf("%w: query parameters ns and name are required", submitter.ErrInvalid)
	}
	return q.Get("ns"), q.Get("name"), nil
}

func statusURL(ns, name string) string {
	return api.PathRelease + "?" + url.Values{"ns": {ns}, "name": {name}}.Encode()
}

func decode(w http.ResponseWriter, r *http.Request, v interface{}) error {
	body := http.MaxBytesReader(w, r.Body, api.MaxBodyBytes)
	if err := json.NewDecoder(body).Decode(v); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return fmt.Errorf("%w: over %d bytes", errTooLarge, tooLarge.Limit)
		}
		return fmt.Errorf("%w: body is not a JSON release request: %v", submitter.ErrInvalid, err)
	}
	return nil
}

func (f *Function) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := statusOf(err)
	if code >= 500 {
		f.log.Errorw("request failed", "method", r.Method, "path", r.URL.Path, "status", code, "error", err)
	} else {
		f.log.Infow("request refused", "method", r.Method, "path", r.URL.Path, "status", code, "error", err)
	}
	writeJSON(w, code, api.Error{Error: err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v interface{}) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}
