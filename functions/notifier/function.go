package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"go.uber.org/zap"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/async-helm/async-helm/pkg/actionlog"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/function"
	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/notifier"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/signing"
	"github.com/async-helm/async-helm/pkg/sweeper"
)

// Function is the notifier.
type Function struct {
	cfg        Config
	log        *zap.SugaredLogger
	metrics    *function.Metrics
	svc        *notifier.Service
	sweeper    *sweeper.Sweeper
	source     http.Handler
	deadLetter http.Handler
}

// New builds the notifier; Start opens its clients and starts watching.
func New(cfg Config, log *zap.SugaredLogger, metrics *function.Metrics) *Function {
	return &Function{cfg: cfg, log: log, metrics: metrics}
}

// Start connects and syncs the watch; reporting goes on until ctx ends.
func (f *Function) Start(ctx context.Context) error {
	cl, err := f.clients()
	if err != nil {
		return err
	}
	sender, err := function.NewSender(f.cfg.SinkConfig, f.metrics)
	if err != nil {
		return err
	}
	redrive := sender
	if f.cfg.RedriveSink != "" {
		if redrive, err = function.NewSender(events.SinkConfig{Sink: f.cfg.RedriveSink}, f.metrics); err != nil {
			return err
		}
	}
	// The same index of release secret metadata as submit's, over the watched namespaces.
	revisions, err := release.NewRevisionIndex(cl.Metadata, f.cfg.Namespaces...)
	if err != nil {
		return err
	}
	store := &release.Store{Client: cl.Typed, Metadata: cl.Metadata}
	records := &consumed.Store{Client: cl.Typed, Namespace: f.cfg.OwnNamespace}
	logs := &actionlog.Store{Client: cl.Typed, Namespace: f.cfg.OwnNamespace}
	f.svc = &notifier.Service{
		Client: cl.Typed, Metadata: cl.Metadata, Sender: sender, Log: f.log, Store: store,
		Namespaces: f.cfg.Namespaces, Revisions: revisions, Workers: f.cfg.Workers,
		ProgressInterval: f.cfg.ProgressInterval, Consumed: records, ActionLogs: logs,
		SigningKey: signing.Key(f.cfg.EventSigningKey),
	}
	f.sweeper = f.newSweeper(cl, store, records, redrive, revisions)
	go logs.PruneEvery(ctx, time.Hour, f.cfg.ActionLogMaxAge, f.log)
	if f.svc.Since, err = f.since(ctx, cl.Typed); err != nil {
		return err
	}
	f.svc.Init()
	answers := function.Adapter{Status: statusOf}
	f.source = function.EventHandler(answers.Events(f.receive))
	f.deadLetter = function.EventHandler(answers.Events(f.receiveDeadLetter))
	if err := f.svc.Start(ctx, f.cfg.Watch); err != nil {
		return err
	}
	return f.sweeper.Start(ctx)
}

// newSweeper is the leader's loop beside the notifier (reading the index in watch mode).
func (f *Function) newSweeper(cl *kube.Clients, store *release.Store, records *consumed.Store,
	redrive events.Sink, revisions *release.RevisionIndex) *sweeper.Sweeper {
	sw := &sweeper.Sweeper{Store: store, Reporter: f.svc, Redrive: redrive, Log: f.log,
		Namespaces: f.cfg.Namespaces, SigningKey: signing.Key(f.cfg.EventSigningKey), EventMaxAge: f.cfg.EventMaxAge,
		Consumed: records,
		Config: sweeper.Config{Interval: f.cfg.SweepInterval, RedriveAfter: f.cfg.RedriveAfter,
			Grace: f.cfg.ReaperGrace, QueueDeadline: f.cfg.QueueDeadline, MaxRedrivesPerPass: f.cfg.MaxRedrivesPerPass}}
	if f.cfg.Watch {
		sw.Index = revisions
	}
	pm := newPassMetrics(f.metrics)
	sw.OnPass = pm.observe
	if f.cfg.LeaderElection {
		sw.Election = f.election(cl, pm)
	}
	return sw
}

// since is when the notifiers' news starts (notifier.SinceOf); zero without an election.
func (f *Function) since(ctx context.Context, client kubernetes.Interface) (time.Time, error) {
	if !f.cfg.LeaderElection {
		return time.Time{}, nil
	}
	return notifier.SinceOf(ctx, client, f.cfg.OwnNamespace)
}

// clients are the Kubernetes clients, their requests counted per sweeper pass.
func (f *Function) clients() (*kube.Clients, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", f.cfg.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("kubernetes config: %w", err)
	}
	rc.Wrap(sweeper.CountingTransport)
	return kube.FromConfig(rc)
}

// election is this pod's part in the notifier's leader election.
func (f *Function) election(cl *kube.Clients, pm *passMetrics) *sweeper.Election {
	b := make([]byte, 4)
	_, _ = rand.Read(b) // two processes on one host (make run) are two candidates
	return &sweeper.Election{Client: cl.Typed, Namespace: f.cfg.OwnNamespace, Name: f.cfg.ElectionName(),
		Identity:      f.cfg.PodName + "_" + hex.EncodeToString(b),
		LeaseDuration: f.cfg.LeaderLeaseDuration, RenewDeadline: f.cfg.LeaderRenewDeadline, RetryPeriod: f.cfg.LeaderRetryPeriod,
		Log: f.log, OnLeading: pm.leading}
}

// Drain has nothing to send once the server has stopped (function.Service).
func (f *Function) Drain(context.Context) {}

// Handler serves health, dead letters, and ApiServerSource events when not watching itself.
func (f *Function) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", function.Healthz(f.source))
	mux.Handle("POST /dead-letter", f.deadLetter)
	mux.Handle("/", f.source)
	return mux
}

// apiServerRef is the payload of an ApiServerSource event in Reference mode.
type apiServerRef struct {
	Kind      string `json:"kind"`
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

// receive queues the Secret an ApiServerSource event names (WATCH=false); 400 for anything else.
func (f *Function) receive(_ context.Context, e cloudevents.Event) (function.EventReply, error) {
	var ref apiServerRef
	if err := e.DataAs(&ref); err != nil || ref.Kind != "Secret" || ref.Name == "" {
		return function.EventReply{}, function.WithStatus(http.StatusBadRequest, errors.New("want an ApiServerSource Reference-mode event for a Secret"))
	}
	f.svc.Enqueue(ref.Namespace, ref.Name)
	return function.EventReply{}, nil
}

// receiveDeadLetter takes the events the Broker gave up delivering, if submit signed them.
func (f *Function) receiveDeadLetter(ctx context.Context, e cloudevents.Event) (function.EventReply, error) {
	if err := events.Verify(e, signing.Key(f.cfg.EventSigningKey), time.Now(), f.cfg.EventMaxAge); err != nil {
		f.log.Warnw("dead letter rejected", "id", e.ID(), "type", e.Type(), "error", err)
		return function.EventReply{}, function.WithStatus(http.StatusUnauthorized, err)
	}
	a, err := events.ParseAccepted(e)
	if err != nil {
		f.log.Warnw("dead letter that is not an accepted request; dropped", "type", e.Type(), "id", e.ID())
		return function.EventReply{}, nil
	}
	marked, err := f.sweeper.DeadLetter(ctx, a)
	if err != nil {
		return function.EventReply{}, err
	}
	f.log.Warnw("dead-lettered request; the sweeper sends it again", "namespace", a.Namespace, "release", a.Name,
		"revision", a.Revision, "marked", marked, "errorCode", e.Extensions()["knativeerrorcode"])
	return function.EventReply{}, nil
}

// statusOf is the status of an event the notifier could not take: 503, sent again.
func statusOf(error) int { return http.StatusServiceUnavailable }
