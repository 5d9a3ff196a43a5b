package executor

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/valuesfrom"
)

// callerObjects is a valuesfrom.Reader that answers one caller only.
type callerObjects struct {
	caller events.Caller
	allow  string
	data   map[string]string
}

func (c callerObjects) Data(_ context.Context, kind, _, name string) (map[string][]byte, bool, error) {
	if c.caller.User != c.allow {
		return nil, false, valuesfrom.ErrForbidden
	}
	d, ok := c.data[kind+"/"+name]
	return map[string][]byte{"values.yaml": []byte(d)}, ok, nil
}

func (e *env) valuesAs(allow string) {
	e.svc.ValuesAs = func(c events.Caller) (valuesfrom.Reader, error) {
		return callerObjects{caller: c, allow: allow, data: map[string]string{"Secret/db": "db: {password: s3cret, user: app}\n"}}, nil
	}
}

// The executor reads the references as the caller when it runs, merges them under the
// inline values, hands Helm the flags, and records the references in the chart it runs.
func TestActionReadsValuesFromAsItsCaller(t *testing.T) {
	e := newEnv(t, 2)
	e.valuesAs("alice")
	a := e.reserve("web", "req-1")
	a.Caller = events.Caller{User: "alice"}
	a.Values = map[string]any{"db": map[string]any{"user": "admin"}}
	a.ValuesFrom = []valuesfrom.Ref{{Kind: valuesfrom.KindSecret, Name: "db"}}
	got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
	if err != nil || got != OutcomeDeployed {
		t.Fatalf("Handle = %s, %v", got, err)
	}
	req := e.helm.reqs[0]
	want := map[string]any{"db": map[string]any{"password": "s3cret", "user": "admin"}}
	if !reflect.DeepEqual(req.Values, want) || req.ReuseValues {
		t.Errorf("Helm ran with %v (reuse %v), want %v", req.Values, req.ReuseValues, want)
	}
	ch := &chart.Chart{Metadata: &chart.Metadata{Name: "x"}}
	if req.Annotate == nil || req.Annotate(ch) != nil {
		t.Fatal("no annotation of the chart Helm runs")
	}
	refs, err := release.RecordedValuesFrom(ch, "ns")
	if err != nil || !reflect.DeepEqual(refs, []valuesfrom.Ref{{Kind: valuesfrom.KindSecret, Name: "db", Key: "values.yaml"}}) {
		t.Errorf("recorded %v, %v", refs, err)
	}
}

// A caller who may not read the Secret when the action runs (rights removed after submit
// accepted it) fails the action with the reason; Helm never runs.
func TestActionFailsWhenItsCallerMayNotReadValuesFrom(t *testing.T) {
	e := newEnv(t, 2)
	e.valuesAs("alice")
	a := e.reserve("web", "req-1")
	a.Caller = events.Caller{User: "mallory"}
	a.ValuesFrom = []valuesfrom.Ref{{Kind: valuesfrom.KindSecret, Name: "db"}}
	got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
	if err != nil || got != OutcomeFailed {
		t.Fatalf("Handle = %s, %v", got, err)
	}
	if len(e.helm.reqs) != 0 {
		t.Errorf("Helm ran %d times", len(e.helm.reqs))
	}
	st, desc := e.status("web")
	if st != helmrelease.StatusFailed || !strings.Contains(desc, "may not read a values_from object") {
		t.Errorf("revision %s %q", st, desc)
	}
}

// Without a reader the executor refuses values_from rather than running without them.
func TestActionWithValuesFromNeedsAReader(t *testing.T) {
	e := newEnv(t, 2)
	a := e.reserve("web", "req-1")
	a.ValuesFrom = []valuesfrom.Ref{{Kind: valuesfrom.KindSecret, Name: "db"}}
	if _, err := e.svc.actionValues(ctx(t), a); err == nil || errors.Is(err, valuesfrom.ErrInvalid) {
		t.Fatalf("actionValues without a reader: %v", err)
	}
}
