package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"go.uber.org/zap"

	"github.com/async-helm/async-helm/pkg/actionlog"
	chartrepos "github.com/async-helm/async-helm/pkg/chart/repos"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/executor"
	"github.com/async-helm/async-helm/pkg/function"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/lease"
	"github.com/async-helm/async-helm/pkg/signing"
)

// Function is the executor: it holds each delivery open while its Helm action runs.
type Function struct {
	cfg      Config
	log      *zap.SugaredLogger
	metrics  *function.Metrics
	shutdown context.Context
	svc      *executor.Service
	events   http.Handler
	// helmOpts are given to the Helm factory after the engine (tests count its requests).
	helmOpts []helmexec.FactoryOption
}

// New builds the executor; Start opens its clients.
func New(cfg Config, log *zap.SugaredLogger, shutdown context.Context, metrics *function.Metrics) *Function {
	return &Function{cfg: cfg, log: log, shutdown: shutdown, metrics: metrics}
}

// Start connects to the cluster.
func (f *Function) Start(ctx context.Context) error {
	cl, err := kube.Open(f.cfg.Kubeconfig)
	if err != nil {
		return err
	}
	charts, err := f.openCharts(ctx, cl)
	if err != nil {
		return err
	}
	factory, err := f.helmFactory(cl)
	if err != nil {
		return err
	}
	holder := f.cfg.Holder
	if holder == "" {
		host, _ := os.Hostname()
		holder = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	f.svc = executor.New(executor.Service{
		Store:  &release.Store{Client: cl.Typed, Metadata: cl.Metadata},
		Helm:   factory,
		Charts: charts,
		Heartbeat: executor.HeartbeatLeases(&lease.Heartbeat{Client: cl.Typed, Holder: holder, Duration: f.cfg.LeaseDuration,
			CancelKey: signing.Key(f.cfg.EventSigningKey)}), // honours only cancels submit signed
		Consumed:        &consumed.Store{Client: cl.Typed, Namespace: f.cfg.Namespace},
		SealKey:         signing.Key(f.cfg.EventSigningKey), // submit seals with its signing key
		RequireBinding:  f.cfg.EventSigningKey != "",
		Log:             f.log,
		MaxActionTime:   f.cfg.MaxActionTime,
		SlotWait:        f.cfg.SlotWait,
		DeliveryTimeout: f.cfg.DeliveryTimeout,
		MaxWaitingBytes: f.cfg.MaxWaitingBytes,
		MaxWaiting:      f.cfg.MaxWaiting,
		CPUSlots:        f.cfg.CPUSlots,
		MaxHistory:      f.cfg.MaxHistory,
		RenderTimeout:   f.cfg.RenderTimeout,
		Orphans:         &helmexec.Orphans{OnChange: f.orphansChanged},
		ActionLogs: &executor.ActionLogs{Store: &actionlog.Store{Client: cl.Typed, Namespace: f.cfg.Namespace},
			Bytes: f.cfg.ActionLogBytes, Keep: f.cfg.ActionLogKeep, FlushEvery: f.cfg.ActionLogFlush},
		ValuesAs: executor.ValuesReaderAs(cl.Config), // values_from, read as the caller
	}, f.cfg.MaxParallel)
	if f.metrics != nil {
		f.svc.Observe = f.metrics.ActionDone
		f.metrics.Registry.MustRegister(newShares(f.svc))
	}
	f.events = function.EventHandler(function.Adapter{Status: statusOf}.Events(f.receive))
	return nil
}

// openCharts is the chart source of the executor's downloads.
func (f *Function) openCharts(ctx context.Context, cl *kube.Clients) (*chartsource.Source, error) {
	charts, err := chartrepos.NewSource(ctx, f.cfg.Settings, cl.Typed, time.Hour, 5*time.Minute)
	if err != nil {
		return nil, err
	}
	// Index entries resolve against the repositories submit validated them with: the
	// cluster's and the namespace's chart repository objects, credentials included.
	repos, err := chartrepos.Open(ctx, cl.Config, charts, chartrepos.OpenOptions{Index: chartrepos.WithoutIndex, Refresh: f.cfg.ChartIndexRefresh, Log: f.log})
	if err != nil {
		return nil, fmt.Errorf("chart repositories: %w", err)
	}
	// A project repository's Secrets go out only for a caller who may read them (receive
	// puts the caller into the context): one may appear under a chart URL while it queues.
	checked := chartrepos.CallerChecked{Set: repos, AsCaller: chartrepos.Impersonating(cl.Config)}
	charts.Repos, charts.Checker, charts.AuthSecrets = checked, checked, checked
	return charts, nil
}

// helmFactory is the Helm client factory of the configured engine and render workers.
func (f *Function) helmFactory(cl *kube.Clients) (*helmexec.Factory, error) {
	engine, err := helmexec.ParseEngine(f.cfg.HelmEngine)
	if err != nil {
		return nil, err
	}
	helmOpts := []helmexec.FactoryOption{helmexec.WithEngine(engine),
		helmexec.WithRenderWorkers(&helmexec.RenderPool{Limits: helmexec.RenderLimits{ // 0s: the defaults
			Timeout: f.cfg.RenderTimeout, MaxMemoryBytes: f.cfg.RenderMemoryMiB << 20, MaxParallel: f.cfg.RenderWorkers}})}
	return helmexec.NewFactory(cl.Config, append(helmOpts, f.helmOpts...)...)
}

// Drain has nothing to send once the server has stopped (function.Service).
func (f *Function) Drain(context.Context) {}

// Handler serves CloudEvents on / and health on /healthz.
func (f *Function) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", function.Healthz(f.events))
	mux.Handle("/", f.events)
	return mux
}

// receive runs the Helm action of an accepted event and answers when it ends (errors: statusOf).
func (f *Function) receive(ctx context.Context, e cloudevents.Event) (function.EventReply, error) {
	a, stored, err := f.admitEvent(e)
	if err != nil {
		return function.EventReply{}, err
	}
	ctx = chartsource.WithCaller(ctx, chartsource.Caller{User: a.Caller.User, UID: a.Caller.UID, Groups: a.Caller.Groups, Extra: a.Caller.Extra})
	outcome, err := f.svc.Handle(ctx, f.shutdown, a, stored)
	if err != nil {
		f.logUnhandled(ctx, e, err)
		return function.EventReply{}, err
	}
	return function.EventReply{Result: cloudevents.NewHTTPResult(http.StatusOK, "%s", outcome)}, nil
}

// admitEvent checks the event's signature and binding and parses it (401 unsigned, 400 malformed).
func (f *Function) admitEvent(e cloudevents.Event) (events.Action, []byte, error) {
	key := signing.Key(f.cfg.EventSigningKey)
	if len(key) > 0 {
		if err := events.Verify(e, key, time.Now(), f.cfg.EventMaxAge); err != nil {
			f.log.Warnw("event rejected", "id", e.ID(), "type", e.Type(), "error", err)
			return events.Action{}, nil, function.WithStatus(http.StatusUnauthorized, err)
		}
	}
	a, err := events.ParseAccepted(e)
	if err != nil {
		f.log.Warnw("event refused", "id", e.ID(), "type", e.Type(), "error", err)
		return a, nil, function.WithStatus(http.StatusBadRequest, err)
	}
	if len(key) > 0 {
		if a.BoundSecretUID, err = events.BoundSecret(e, key); err != nil {
			f.log.Warnw("event rejected", "id", e.ID(), "type", e.Type(), "error", err)
			return a, nil, function.WithStatus(http.StatusUnauthorized, err)
		}
	}
	stored, err := e.MarshalJSON()
	if err != nil {
		return a, nil, function.WithStatus(http.StatusBadRequest, fmt.Errorf("encode event: %w", err))
	}
	return a, stored, nil
}

// logUnhandled logs a delivery the executor did not run, but not busy or held elsewhere.
func (f *Function) logUnhandled(ctx context.Context, e cloudevents.Event, err error) {
	switch {
	case errors.Is(err, executor.ErrBusy), errors.Is(err, executor.ErrHeldElsewhere):
	case ctx.Err() != nil:
		f.log.Infow("delivery cancelled by its sender", "id", e.ID(), "error", err.Error())
	default:
		f.log.Errorw("event not handled; asking for redelivery", "id", e.ID(), "error", err.Error())
	}
}

// orphansChanged logs the Helm goroutines that outlived their action, fenced off.
func (f *Function) orphansChanged(orphans int) {
	f.log.Warnw("orphaned Helm work", "orphanedActions", orphans)
}

// statusOf is the status of an event the executor did not run; the Broker redelivers on both.
func statusOf(err error) int {
	if errors.Is(err, executor.ErrBusy) {
		return http.StatusTooManyRequests
	}
	return http.StatusServiceUnavailable // held elsewhere, cancelled or failed: redelivered
}
