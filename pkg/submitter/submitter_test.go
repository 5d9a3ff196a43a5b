package submitter

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"helm.sh/helm/v3/pkg/chart"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/ledger"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

var key = []byte("0123456789abcdef0123456789abcdef")

type sender struct {
	mu   sync.Mutex
	sent []cloudevents.Event
	err  error
}

func (s *sender) Send(_ context.Context, e cloudevents.Event) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.err != nil {
		return s.err
	}
	s.sent = append(s.sent, e)
	return nil
}

type charts map[string]*chart.Chart

func (c charts) Get(_ context.Context, ref chartref.Ref) (*chartsource.Chart, error) {
	ch, ok := c[ref.URL]
	if !ok {
		return nil, chartsource.ErrNotFound
	}
	return &chartsource.Chart{Digest: "d", Loaded: ch}, nil
}

// authz allows what is listed, and records what it was asked.
type authz struct {
	allow map[auth.Need]bool
	asked []auth.Need
}

func (a *authz) Check(_ context.Context, u *auth.User, needs ...auth.Need) error {
	for _, n := range needs {
		a.asked = append(a.asked, n)
		if !a.allow[n] {
			return auth.ErrForbidden
		}
	}
	return nil
}

// counted is a ledger that always counts c and records nothing.
type counted struct{ c ledger.Counts }

func (l counted) Admit(_, _ string, lim ledger.Limits) (func(), *ledger.Refusal) {
	if r := ledger.Decide(l.c, lim); r != nil {
		return nil, r
	}
	return func() {}, nil
}
func (counted) Add(context.Context, ledger.Entry) error { return nil }
func (counted) Pending(string, string) (string, bool)   { return "", false }

type env struct {
	t      *testing.T
	nss    cache.Indexer
	c      *fakekube.Cluster
	store  *release.Store
	sender *sender
	svc    *Service
}

func newEnv(t *testing.T) *env {
	t.Helper()
	clock := fakekube.NewClock(t0)
	c := fakekube.New(clock)
	nss := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	_ = nss.Add(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}})
	tiny := &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "1.0.0", APIVersion: "v2"},
		Schema: []byte(`{"type":"object","properties":{"replicas":{"type":"integer"}}}`)}
	e := &env{t: t, nss: nss, c: c, sender: &sender{}, store: &release.Store{Client: c, Metadata: c.Metadata(), Clock: clock}}
	e.svc = &Service{Store: e.store, Charts: charts{"https://charts.example/tiny.tgz": tiny}, Sender: e.sender,
		Namespaces: corelisters.NewNamespaceLister(nss), SigningKey: key, Clock: clock,
		NewID: func() string { return "req-1" },
		LeaseAlive: func(ctx context.Context, ns, key string) (bool, error) {
			return lease.Alive(ctx, c, ns, key, clock.Now())
		}}
	return e
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func install(name string) api.ReleaseRequest {
	return api.ReleaseRequest{Name: name, Namespace: "ns", ChartURL: "https://charts.example/tiny.tgz",
		Values: map[string]any{"replicas": 2}}
}

func (e *env) secrets() []corev1.Secret {
	e.t.Helper()
	l, err := e.c.CoreV1().Secrets("").List(ctx(e.t), metav1.ListOptions{LabelSelector: release.SelectorReleaseSecrets})
	if err != nil {
		e.t.Fatal(err)
	}
	return l.Items
}

func TestSubmitReservesSignsAndEmits(t *testing.T) {
	e := newEnv(t)
	acc, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), &auth.User{Name: "alice", UID: "u1", Groups: []string{"dev"}})
	if err != nil {
		t.Fatal(err)
	}
	if acc.Revision != 1 || acc.RequestID != "req-1" || acc.Secret.Name != "sh.helm.release.v1.web.v1" ||
		acc.Secret.Data != nil || acc.Secret.Kind != "Secret" || acc.Secret.APIVersion != "v1" || acc.Secret.UID == "" {
		t.Errorf("accepted %+v (kind %q, data %v)", acc, acc.Secret.Kind, acc.Secret.Data)
	}
	if len(e.sender.sent) != 1 {
		t.Fatalf("%d events sent", len(e.sender.sent))
	}
	ev := e.sender.sent[0]
	if err := events.Verify(ev, key, t0, time.Hour); err != nil {
		t.Errorf("the accepted event does not verify: %v", err)
	}
	a, err := events.ParseAccepted(ev)
	if err != nil {
		t.Fatal(err)
	}
	if a.Caller.User != "alice" || a.Caller.UID != "u1" || a.RequestID != "req-1" || a.ReuseChart || a.Values["replicas"] != float64(2) {
		t.Errorf("payload %+v", a)
	}
	// The reservation holds the very event that was sent (the sweeper re-sends it).
	sec := e.secrets()[0]
	raw, _ := unbound(ev).MarshalJSON()
	if string(sec.Data[release.DataEvent]) != string(raw) {
		t.Errorf("stored event differs from the sent one")
	}
	if sec.Labels[release.LabelQueued] != "true" || sec.Labels[release.LabelRequestID] != "req-1" {
		t.Errorf("labels %v", sec.Labels)
	}
}

func TestSubmitRefusals(t *testing.T) {
	for _, tc := range []struct {
		name   string
		action release.Action
		req    func() api.ReleaseRequest
		setup  func(e *env)
		err    error
	}{
		{"bad name", release.ActionInstall, func() api.ReleaseRequest { return install("Bad_Name") }, nil, ErrInvalid},
		{"no chart on install", release.ActionInstall, func() api.ReleaseRequest { r := install("web"); r.ChartURL = ""; return r }, nil, ErrInvalid},
		{"bad timeout", release.ActionInstall, func() api.ReleaseRequest { r := install("web"); r.Timeout = "soon"; return r }, nil, ErrInvalid},
		{"no such namespace", release.ActionInstall, func() api.ReleaseRequest { r := install("web"); r.Namespace = "nope"; return r }, nil, ErrNamespaceNotFound},
		{"values against the schema", release.ActionInstall, func() api.ReleaseRequest {
			r := install("web")
			r.Values = map[string]any{"replicas": "many"}
			return r
		}, nil, ErrValues},
		{"unknown chart", release.ActionInstall, func() api.ReleaseRequest {
			r := install("web")
			r.ChartURL = "https://charts.example/none.tgz"
			return r
		}, nil, chartsource.ErrNotFound},
		{"name in use", release.ActionInstall, func() api.ReleaseRequest { return install("web") }, func(e *env) {
			if _, err := e.svc.Submit(ctx(e.t), release.ActionInstall, install("web"), nil); err != nil {
				e.t.Fatal(err)
			}
		}, release.ErrNameInUse},
		{"upgrade while pending", release.ActionUpgrade, func() api.ReleaseRequest { return install("web") }, func(e *env) {
			if _, err := e.svc.Submit(ctx(e.t), release.ActionInstall, install("web"), nil); err != nil {
				e.t.Fatal(err)
			}
		}, release.ErrPending},
		{"upgrade of nothing", release.ActionUpgrade, func() api.ReleaseRequest { return install("web") }, nil, release.ErrNotFound},
		{"queue full in the namespace", release.ActionInstall, func() api.ReleaseRequest { return install("web") }, func(e *env) {
			e.svc.Ledger = counted{ledger.Counts{Namespace: 2, Total: 2, Namespaces: 1}}
			e.svc.MaxQueuedPerNamespace, e.svc.MaxQueued = 2, 10
		}, ErrBusy},
		{"queue full in the cluster", release.ActionInstall, func() api.ReleaseRequest { return install("web") }, func(e *env) {
			e.svc.Ledger = counted{ledger.Counts{Total: 20, Namespaces: 2}}
			e.svc.MaxQueuedPerNamespace, e.svc.MaxQueued = 2, 10
		}, ErrBusy},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			if tc.setup != nil {
				tc.setup(e)
			}
			before := len(e.secrets())
			sent := len(e.sender.sent)
			_, err := e.svc.Submit(ctx(t), tc.action, tc.req(), nil)
			if !errors.Is(err, tc.err) {
				t.Fatalf("Submit: %v, want %v", err, tc.err)
			}
			if len(e.secrets()) != before || len(e.sender.sent) != sent {
				t.Errorf("a refused request reserved or sent something")
			}
		})
	}
}

// The refusal names its bound, says nothing was reserved and gives Retry-After (the
// decision itself: ledger.Decide's table).
func TestAdmissionRefusal(t *testing.T) {
	for _, tc := range []struct {
		name            string
		c               ledger.Counts
		busy            bool
		scope           string
		queuedN, limitN int
	}{
		{"below both", ledger.Counts{Total: 5, Namespace: 1, Namespaces: 2}, false, "", 0, 0},
		{"namespace at its bound", ledger.Counts{Total: 5, Namespace: 2, Namespaces: 2}, true, "in the namespace ns", 2, 2},
		{"namespace over its share", ledger.Counts{Total: 10, Namespace: 6, Namespaces: 2}, true, "of the namespace, over its share ns", 6, 5},
		{"cluster at its ceiling", ledger.Counts{Total: 20, Namespace: 0, Namespaces: 3}, true, "in the cluster ns", 20, 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.svc.Ledger = counted{tc.c}
			e.svc.MaxQueuedPerNamespace, e.svc.MaxQueued = 2, 10
			if tc.name != "namespace at its bound" {
				e.svc.MaxQueuedPerNamespace = 0
			}
			_, err := e.svc.admit("ns", nil)
			var busy *BusyError
			if got := errors.As(err, &busy); got != tc.busy {
				t.Fatalf("admit: %v", err)
			}
			if tc.busy && (busy.Scope != tc.scope || busy.Queued != tc.queuedN || busy.Limit != tc.limitN || busy.RetryAfter != 10*time.Second ||
				!errors.Is(err, ErrBusy) || !strings.Contains(err.Error(), "nothing was reserved")) {
				t.Errorf("busy %+v: %v", busy, err)
			}
		})
	}
}

func TestAuthorization(t *testing.T) {
	e := newEnv(t)
	a := &authz{allow: map[auth.Need]bool{{Verb: "create", Resource: "secrets", Namespace: "ns"}: true}}
	e.svc.Authorizer = a
	u := &auth.User{Name: "dev"}
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), u); !errors.Is(err, auth.ErrForbidden) {
		t.Fatalf("without update rights: %v", err)
	}
	if len(e.secrets()) != 0 {
		t.Error("a forbidden request reserved")
	}
	a.allow[auth.Need{Verb: "update", Resource: "secrets", Namespace: "ns"}] = true
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), u); err != nil {
		t.Fatal(err)
	}
	// Authentication off (nil user): the authorizer is not asked.
	asked := len(a.asked)
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install("db"), nil); err != nil || len(a.asked) != asked {
		t.Errorf("nil user: %v, asked %d more", err, len(a.asked)-asked)
	}
}

// When the event cannot be handed over, the reservation is taken back: nothing stays
// pending with nobody working on it.
func TestUndoOnSendFailure(t *testing.T) {
	e := newEnv(t)
	e.sender.err = errors.New("broker down")
	_, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil)
	if !errors.Is(err, ErrNotAccepted) || !strings.Contains(err.Error(), "broker down") {
		t.Fatalf("Submit: %v", err)
	}
	if n := len(e.secrets()); n != 0 {
		t.Errorf("%d reservations left after the undo", n)
	}
	// The undo itself fails: the error says so, and the reservation (with its stored
	// event) stays for the notifier's sweeper.
	e.c.Fail("delete", "secrets", errors.New("etcd timeout"))
	_, err = e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil)
	if !errors.Is(err, ErrNotAccepted) || !strings.Contains(err.Error(), "etcd timeout") || !strings.Contains(err.Error(), "re-sent by the notifier") {
		t.Fatalf("Submit with a failing undo: %v", err)
	}
	if n := len(e.secrets()); n != 1 {
		t.Errorf("%d reservations, want the one whose undo failed", n)
	}
}

// An upgrade that names no chart reuses the deployed revision's chart; a release with no
// deployed revision has none to reuse (422), and nothing is reserved.
func TestChartlessUpgradeNeedsADeployedRevision(t *testing.T) {
	e := newEnv(t)
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil); err != nil {
		t.Fatal(err)
	}
	if _, err := e.store.MarkFailed(ctx(t), "ns", "web", 1, "x", release.KeepFailed); err != nil {
		t.Fatal(err)
	}
	e.svc.NewID = func() string { return "req-2" }
	_, err := e.svc.Submit(ctx(t), release.ActionUpgrade, api.ReleaseRequest{Name: "web", Namespace: "ns"}, nil)
	if !errors.Is(err, chartsource.ErrNotFound) {
		t.Fatalf("chart-less upgrade of a release never deployed: %v", err)
	}
	if n := len(e.secrets()); n != 1 {
		t.Errorf("%d revisions, want only the failed install", n)
	}
}

func TestUnsignedWithoutKey(t *testing.T) {
	e := newEnv(t)
	e.svc.SigningKey = nil
	e.svc.NewID = nil
	acc, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.sender.sent[0].Extensions()[events.ExtSignature]; ok {
		t.Error("signed without a key")
	}
	if len(acc.RequestID) != 24 {
		t.Errorf("generated request id %q", acc.RequestID)
	}
}
