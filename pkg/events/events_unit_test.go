package events

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/async-helm/async-helm/pkg/api"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release"
)

var update = flag.Bool("update", false, "rewrite the golden files")

var (
	key = []byte("0123456789abcdef0123456789abcdef")
	t0  = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
)

func action() Action {
	return Action{Action: release.ActionInstall, Namespace: "ns", Name: "web", Revision: 1, SecretName: release.SecretName("web", 1),
		Chart: chartref.Ref{URL: "https://charts.example/tiny-1.0.0.tgz"}, Values: map[string]any{"replicas": 2},
		Options: Options{Timeout: 5 * time.Minute, Wait: true}, Caller: Caller{User: "alice", Groups: []string{"dev"}}, RequestID: "req-1"}
}

func signed(t *testing.T) cloudevents.Event {
	t.Helper()
	e, err := NewAccepted(action())
	if err != nil {
		t.Fatal(err)
	}
	Sign(&e, key, t0)
	return e
}

func TestSignVerify(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(e *cloudevents.Event)
		key    []byte
		now    time.Time
		ok     bool
	}{
		{"as signed", func(*cloudevents.Event) {}, key, t0.Add(time.Minute), true},
		{"at the edge of the window", func(*cloudevents.Event) {}, key, t0.Add(3 * time.Hour), true},
		{"replayed later", func(*cloudevents.Event) {}, key, t0.Add(3*time.Hour + time.Second), false},
		{"from the future", func(*cloudevents.Event) {}, key, t0.Add(-2 * time.Minute), false},
		{"small clock skew", func(*cloudevents.Event) {}, key, t0.Add(-30 * time.Second), true},
		{"another key", func(*cloudevents.Event) {}, []byte("another-key-another-key-another-k"), t0, false},
		{"unsigned", func(e *cloudevents.Event) { e.SetExtension(ExtSignature, nil); e.SetExtension(ExtSignatureV2, nil) }, key, t0, false},
		{"malformed signature", func(e *cloudevents.Event) { e.SetExtension(ExtSignatureV2, "%%%") }, key, t0, false},
		// An event signed before v2 carries only v1: accepted in the same window.
		{"signed before v2", func(e *cloudevents.Event) { e.SetExtension(ExtSignatureV2, nil) }, key, t0.Add(time.Minute), true},
		{"v1 only, replayed later", func(e *cloudevents.Event) { e.SetExtension(ExtSignatureV2, nil) }, key, t0.Add(3*time.Hour + time.Second), false},
		// A v2 signature that does not match is not rescued by the v1 one beside it.
		{"v2 altered, v1 kept", func(e *cloudevents.Event) { e.SetExtension(ExtSignatureV2, e.Extensions()[ExtSignature]) }, key, t0, false},
		{"payload altered", func(e *cloudevents.Event) {
			a := action()
			a.Caller.User = "system:admin"
			_ = e.SetData(cloudevents.ApplicationJSON, a)
		}, key, t0, false},
		{"id altered", func(e *cloudevents.Event) { e.SetID("req-2") }, key, t0, false},
		{"type altered", func(e *cloudevents.Event) { e.SetType(TypeUpgradeAccepted) }, key, t0, false},
		{"source altered", func(e *cloudevents.Event) { e.SetSource("/elsewhere") }, key, t0, false},
		{"subject altered", func(e *cloudevents.Event) { e.SetSubject("ns/db") }, key, t0, false},
		{"time altered", func(e *cloudevents.Event) { e.SetTime(t0.Add(time.Hour)) }, key, t0.Add(time.Hour), false},
		{"revision altered", func(e *cloudevents.Event) { e.SetExtension(ExtRevision, 2) }, key, t0, false},
		{"request id altered", func(e *cloudevents.Event) { e.SetExtension(ExtRequestID, "req-2") }, key, t0, false},
		// Extensions outside the signed set (a broker's) may change.
		{"broker extension added", func(e *cloudevents.Event) { e.SetExtension("knativeerrorcode", 500) }, key, t0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := signed(t)
			tc.change(&e)
			err := Verify(e, tc.key, tc.now, 3*time.Hour)
			if (err == nil) != tc.ok {
				t.Fatalf("Verify: %v, want ok %v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrSignature) {
				t.Errorf("%v is not ErrSignature", err)
			}
		})
	}
	// The signature survives the JSON round trip the reservation stores it in.
	e := signed(t)
	raw, err := e.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	var back cloudevents.Event
	if err := back.UnmarshalJSON(raw); err != nil {
		t.Fatal(err)
	}
	if err := Verify(back, key, t0, time.Hour); err != nil {
		t.Errorf("the stored event does not verify: %v", err)
	}
	// Sign keeps a time already set.
	pre := signed(t)
	Sign(&pre, key, t0.Add(time.Hour))
	if !pre.Time().Equal(t0) {
		t.Errorf("Sign moved the event time to %v", pre.Time())
	}
}

func TestAccepted(t *testing.T) {
	e := signed(t)
	if e.ID() != "req-1" || e.Type() != TypeInstallAccepted || e.Subject() != "ns/web" || e.Source() != SourceSubmit {
		t.Errorf("event %s", e)
	}
	a, err := ParseAccepted(e)
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != "web" || a.Caller.User != "alice" || a.Options.Timeout != 5*time.Minute || a.Values["replicas"] != float64(2) {
		t.Errorf("round trip %+v", a)
	}
	up := action()
	up.Action = release.ActionUpgrade
	ue, _ := NewAccepted(up)
	if ue.Type() != TypeUpgradeAccepted {
		t.Errorf("upgrade type %s", ue.Type())
	}
	for _, tc := range []struct {
		name   string
		change func(e *cloudevents.Event)
	}{
		{"not an accepted event", func(e *cloudevents.Event) { e.SetType(TypeStatusPrefix + "deployed") }},
		{"action does not match the type", func(e *cloudevents.Event) { e.SetType(TypeUpgradeAccepted) }},
		{"secret name of another revision", func(e *cloudevents.Event) {
			a := action()
			a.SecretName = release.SecretName("web", 2)
			_ = e.SetData(cloudevents.ApplicationJSON, a)
		}},
		{"no revision", func(e *cloudevents.Event) {
			a := action()
			a.Revision = 0
			_ = e.SetData(cloudevents.ApplicationJSON, a)
		}},
		{"no namespace", func(e *cloudevents.Event) {
			a := action()
			a.Namespace = ""
			_ = e.SetData(cloudevents.ApplicationJSON, a)
		}},
		{"subject of another release", func(e *cloudevents.Event) { e.SetSubject("ns/db") }},
		{"payload not JSON", func(e *cloudevents.Event) { _ = e.SetData("text/plain", []byte("x")) }},
	} {
		e := signed(t)
		tc.change(&e)
		if _, err := ParseAccepted(e); err == nil {
			t.Errorf("%s: accepted", tc.name)
		}
	}
}

func TestStatusEvent(t *testing.T) {
	c := StatusChange{Namespace: "ns", Name: "web", Revision: 2, Status: "failed", Chart: "tiny", ChartVersion: "1.0.0",
		Reason: "timed out", RequestID: "req-1"}
	e, err := NewStatus(c)
	if err != nil {
		t.Fatal(err)
	}
	e.SetTime(t0) // the only field that changes from run to run
	raw, err := e.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "status-failed.json", raw)
	back, err := ParseStatus(e)
	if err != nil || back != c {
		t.Errorf("round trip %+v, %v", back, err)
	}
	plain, _ := NewStatus(StatusChange{Namespace: "ns", Name: "web", Revision: 1, Status: "deployed"})
	if _, ok := plain.Extensions()[ExtRequestID]; ok {
		t.Error("a status of a plain-helm release carries an empty request id")
	}
	if _, err := ParseStatus(signed(t)); err == nil {
		t.Error("an accepted event parsed as a status")
	}
}

func TestRequested(t *testing.T) {
	for typ, want := range map[string]release.Action{TypeInstallRequested: release.ActionInstall, TypeUpgradeRequested: release.ActionUpgrade} {
		e := cloudevents.NewEvent()
		e.SetType(typ)
		_ = e.SetData(cloudevents.ApplicationJSON, api.ReleaseRequest{Name: "web", Namespace: "ns"})
		a, r, err := ParseRequested(e)
		if err != nil || a != want || r.Name != "web" {
			t.Errorf("%s: %s %+v %v", typ, a, r, err)
		}
	}
	e := cloudevents.NewEvent()
	e.SetType(TypeInstallAccepted)
	if _, _, err := ParseRequested(e); err == nil {
		t.Error("an accepted event parsed as a request")
	}
	e.SetType(TypeInstallRequested)
	_ = e.SetData(cloudevents.ApplicationJSON, []int{1})
	if _, _, err := ParseRequested(e); err == nil {
		t.Error("a request that is not a ReleaseRequest parsed")
	}
}

func TestSender(t *testing.T) {
	var calls atomic.Int32
	var status atomic.Int32
	status.Store(http.StatusAccepted)
	var lastExt atomic.Value
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		lastExt.Store(r.Header.Get("Ce-Cluster"))
		w.WriteHeader(int(status.Load()))
	}))
	defer srv.Close()
	s, err := NewSender(SinkConfig{Sink: srv.URL, CEOverrides: `{"extensions":{"cluster":"east"}}`}, srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	s.Backoff = time.Millisecond
	var observed []error
	s.Observe = func(_ string, err error) { observed = append(observed, err) }
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := s.Send(c, signed(t)); err != nil {
		t.Fatalf("acknowledged send: %v", err)
	}
	if lastExt.Load() != "east" {
		t.Errorf("K_CE_OVERRIDES extension not applied: %v", lastExt.Load())
	}
	status.Store(http.StatusServiceUnavailable)
	calls.Store(0)
	err = s.Send(c, signed(t))
	var res *cehttp.Result
	if !errors.Is(err, ErrUndelivered) || calls.Load() != 4 || errors.As(err, &res) {
		t.Errorf("refused send: %v after %d attempts", err, calls.Load())
	}
	if len(observed) != 2 || observed[0] != nil || observed[1] == nil {
		t.Errorf("observed %v", observed)
	}
	if _, err := NewSender(SinkConfig{Sink: srv.URL, CEOverrides: "{"}, nil); err == nil {
		t.Error("malformed K_CE_OVERRIDES accepted")
	}
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("%s differs (go test -update to rewrite):\n%s", path, got)
	}
}

// An unreachable sink is undelivered, after the retries, within the caller's deadline.
func TestSenderUnreachable(t *testing.T) {
	s, err := NewSender(SinkConfig{Sink: "http://127.0.0.1:1"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	s.Retries, s.Backoff = 2, time.Millisecond
	c, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Send(c, signed(t)); !errors.Is(err, ErrUndelivered) {
		t.Errorf("unreachable sink: %v", err)
	}
	gone, stop := context.WithCancel(context.Background())
	stop()
	if err := s.Send(gone, signed(t)); !errors.Is(err, ErrUndelivered) {
		t.Errorf("cancelled send: %v", err)
	}
}

func TestNames(t *testing.T) {
	if Subject("ns", "web") != "ns/web" {
		t.Errorf("subject %q", Subject("ns", "web"))
	}
	if id := StatusEventID("ns", "web", 3, "deployed", "r1"); id != "ns/web/v3/deployed/r1" {
		t.Errorf("status id %q", id)
	}
	for typ, want := range map[string]bool{TypeInstallRequested: true, TypeUpgradeRequested: true,
		TypeInstallAccepted: false, TypeStatusPrefix + "deployed": false, "": false} {
		if _, ok := RequestedAction(typ); ok != want {
			t.Errorf("RequestedAction(%q) ok = %v", typ, ok)
		}
	}
}

func TestProgressEvent(t *testing.T) {
	c := ProgressChange{Namespace: "ns", Name: "web", Revision: 2,
		Progress: progress.Progress{Phase: "waiting", Ready: 1, Total: 3, WaitingFor: []string{"Deployment/web"}, Updated: t0}}
	e, err := NewProgress(c)
	if err != nil {
		t.Fatal(err)
	}
	if e.Type() != TypeProgress || e.Subject() != "ns/web" || e.Source() != SourceNotifier ||
		e.ID() != fmt.Sprintf("ns/web/v2/progress/%d", t0.UnixMilli()) || e.Extensions()[ExtRevision] != int32(2) {
		t.Errorf("event %s", e)
	}
	var back ProgressChange
	if err := e.DataAs(&back); err != nil || back.Progress.Ready != 1 || back.Progress.WaitingFor[0] != "Deployment/web" || !back.Progress.Updated.Equal(t0) {
		t.Errorf("round trip %+v, %v", back, err)
	}
	// A later progress of the same revision is another event.
	c.Progress.Updated = t0.Add(time.Second)
	later, _ := NewProgress(c)
	if later.ID() == e.ID() {
		t.Error("two progress states share an id")
	}
}
