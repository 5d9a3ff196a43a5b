package submitter

import (
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// Every accepted request that may roll back carries, under submit's signature, the record
// it may restore: a rollback its target, an atomic upgrade or one remediated by rollback
// the deployed revision it starts from; nothing for one that never rolls back.
func TestAcceptedRollbacksPinTheirTarget(t *testing.T) {
	e := newEnv(t)
	e.deploy("web", 1, helmrelease.StatusSuperseded)
	e.deploy("web", 2, helmrelease.StatusDeployed)
	for _, name := range []string{"api", "db", "ui"} {
		e.deploy(name, 1, helmrelease.StatusDeployed)
	}
	want := func(name string, v int) *release.Pin {
		t.Helper()
		p, err := release.PinOf(e.rev(name, v), "")
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	pins := []*release.Pin{want("web", 1), want("api", 1), want("db", 1), nil}
	if _, err := e.svc.Rollback(ctx(t), api.RollbackRequest{Name: "web", Namespace: "ns", Version: 1}, nil); err != nil {
		t.Fatal(err)
	}
	for _, req := range []api.ReleaseRequest{
		{Name: "api", Namespace: "ns", Atomic: true},
		{Name: "db", Namespace: "ns", Remediation: api.RemediationRollback},
		{Name: "ui", Namespace: "ns"},
	} {
		if _, err := e.svc.Submit(ctx(t), release.ActionUpgrade, req, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i, a := range e.sentActions() {
		switch got := a.RollbackPin; {
		case pins[i] == nil && got != nil, pins[i] != nil && (got == nil || *got != *pins[i]):
			t.Errorf("request %d (%s) pinned %+v, want %+v", i, a.Action, got, pins[i])
		}
	}
}

func (e *env) rev(name string, v int) *helmrelease.Release {
	e.t.Helper()
	rel, err := e.store.Get(ctx(e.t), "ns", name, v)
	if err != nil {
		e.t.Fatal(err)
	}
	return rel
}

// An accepted upgrade that may reuse values carries, under submit's signature, the digest
// of the values of the revision it starts from (the executor reuses only those); one that
// gives its own values without reuse carries none, and a first install's none.
func TestAcceptedUpgradesPinTheValuesTheyReuse(t *testing.T) {
	e := newEnv(t)
	e.deploy("web", 1, helmrelease.StatusSuperseded)
	e.deploy("web", 2, helmrelease.StatusDeployed)
	e.deploy("api", 1, helmrelease.StatusDeployed)
	e.deploy("db", 1, helmrelease.StatusDeployed)
	base, err := release.ValuesPinOf(e.rev("web", 2))
	if err != nil {
		t.Fatal(err)
	}
	api1, _ := release.ValuesPinOf(e.rev("api", 1))
	pins := []*release.Pin{base, api1, nil}
	for _, req := range []api.ReleaseRequest{
		{Name: "web", Namespace: "ns"},
		{Name: "api", Namespace: "ns", ReuseValues: true, Values: map[string]any{"a": 1}},
		{Name: "db", Namespace: "ns", Values: map[string]any{"a": 1}},
	} {
		if _, err := e.svc.Submit(ctx(t), release.ActionUpgrade, req, nil); err != nil {
			t.Fatal(err)
		}
	}
	for i, a := range e.sentActions() {
		switch got := a.ValuesPin; {
		case pins[i] == nil && got != nil, pins[i] != nil && (got == nil || *got != *pins[i] || got.Digest == ""):
			t.Errorf("request %d (%s) pinned values %+v, want %+v", i, a.Name, got, pins[i])
		}
	}
}

// sentActions are the payloads of the events sent so far.
func (e *env) sentActions() []events.Action {
	e.t.Helper()
	var out []events.Action
	for _, ev := range e.sender.sent {
		a, err := events.ParseAccepted(ev)
		if err != nil {
			e.t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

// A rollback reads its target's Secret once: the pin digests the record and the apply
// method of that one read. Reading the apply method again cost a second API read per
// rollback, and a record rewritten in between gave a pin of neither record.
func TestRollbackReadsItsTargetOnce(t *testing.T) {
	e := newEnv(t)
	e.deploy("web", 1, helmrelease.StatusSuperseded)
	e.deploy("web", 2, helmrelease.StatusDeployed)
	target := release.SecretName("web", 1)
	secs := e.c.CoreV1().Secrets("ns")
	sec, err := secs.Get(ctx(t), target, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sec.Data["release"], err = release.WithV4Fields(sec.Data["release"], release.V4Fields{ApplyMethod: "ssa"}); err != nil {
		t.Fatal(err)
	}
	if _, err := secs.Update(ctx(t), sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	want, err := release.PinOf(e.rev("web", 1), "ssa")
	if err != nil {
		t.Fatal(err)
	}
	e.c.ClearActions()
	if _, err := e.svc.Rollback(ctx(t), api.RollbackRequest{Name: "web", Namespace: "ns", Version: 1}, nil); err != nil {
		t.Fatal(err)
	}
	reads := 0
	for _, a := range e.c.Actions() {
		if g, ok := a.(k8stesting.GetAction); ok && a.GetVerb() == "get" && a.GetResource().Resource == "secrets" && g.GetName() == target {
			reads++
		}
	}
	if reads != 1 {
		t.Errorf("the rollback read its target %s %d times, want once", target, reads)
	}
	if got := e.sentActions()[0].RollbackPin; got == nil || *got != *want {
		t.Errorf("pinned %+v, want %+v (revision 1 with apply method ssa)", got, want)
	}
}
