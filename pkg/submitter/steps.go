package submitter

import (
	"context"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	corev1 "k8s.io/api/core/v1"

	"github.com/async-helm/async-helm/pkg/auth"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/release"
)

// Steps on the way to a 201 whose time ObserveSteps reports (docs/benchmarks.md).
const (
	StepAuthorize = "authorize" // the access review (cached)
	StepChart     = "chart"     // fetching the chart (cached by digest)
	StepReserve   = "reserve"   // the reservation's create: the one API write
	StepSend      = "send"      // the accepted event to the sink
)

// StepObserver is told how long one step took (a metrics histogram).
type StepObserver func(step string, d time.Duration)

// ObserveSteps makes s report the time of each step by wrapping its ports.
func ObserveSteps(s *Service, observe StepObserver) {
	s.Store = timedStore{Store: s.Store, observe: observe}
	s.Sender = timedSender{EventSender: s.Sender, observe: observe}
	s.Charts = timedCharts{Charts: s.Charts, observe: observe}
	if s.Authorizer != nil {
		s.Authorizer = timedAuthorizer{Authorizer: s.Authorizer, observe: observe}
	}
}

func since(observe StepObserver, step string, start time.Time) { observe(step, time.Since(start)) }

type timedStore struct {
	Store
	observe StepObserver
}

func (t timedStore) Reserve(ctx context.Context, r release.Reservation) (*corev1.Secret, error) {
	defer since(t.observe, StepReserve, time.Now())
	return t.Store.Reserve(ctx, r)
}

type timedSender struct {
	EventSender
	observe StepObserver
}

func (t timedSender) Send(ctx context.Context, e cloudevents.Event) error {
	defer since(t.observe, StepSend, time.Now())
	return t.EventSender.Send(ctx, e)
}

type timedCharts struct {
	Charts
	observe StepObserver
}

func (t timedCharts) Get(ctx context.Context, ref chartref.Ref) (*chartsource.Chart, error) {
	defer since(t.observe, StepChart, time.Now())
	return t.Charts.Get(ctx, ref)
}

type timedAuthorizer struct {
	Authorizer
	observe StepObserver
}

func (t timedAuthorizer) Check(ctx context.Context, u *auth.User, needs ...auth.Need) error {
	defer since(t.observe, StepAuthorize, time.Now())
	return t.Authorizer.Check(ctx, u, needs...)
}
