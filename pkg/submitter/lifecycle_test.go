package submitter

import (
	"context"
	"errors"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// deploy writes revision v of a release as Helm would (status st, values replicas=v).
func (e *env) deploy(name string, v int, st helmrelease.Status) {
	e.t.Helper()
	rel := &helmrelease.Release{Name: name, Namespace: "ns", Version: v,
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "1.0.0", APIVersion: "v2"},
			Templates: []*chart.File{{Name: "templates/cm.yaml", Data: []byte("kind: ConfigMap")}}},
		Config: map[string]any{"replicas": v}, Manifest: "kind: ConfigMap",
		Info: &helmrelease.Info{Status: st, Description: "Install complete"}}
	if err := storage.NewSecrets(e.c.CoreV1().Secrets("ns")).Create(release.SecretName(name, v), rel); err != nil {
		e.t.Fatal(err)
	}
}

func TestUninstallMarksSignsAndEmits(t *testing.T) {
	e := newEnv(t)
	az := &authz{allow: map[auth.Need]bool{
		{Verb: "update", Resource: "secrets", Namespace: "ns"}: true,
		{Verb: "delete", Resource: "secrets", Namespace: "ns"}: true}}
	e.svc.Authorizer = az
	e.deploy("web", 1, helmrelease.StatusSuperseded)
	e.deploy("web", 2, helmrelease.StatusDeployed)
	u := &auth.User{Name: "alice", UID: "u1"}

	acc, err := e.svc.Uninstall(ctx(t), "ns", "web", "2", u)
	if err != nil {
		t.Fatal(err)
	}
	if acc.Revision != 2 || acc.Secret.Name != release.SecretName("web", 2) || acc.Secret.Data != nil {
		t.Errorf("accepted %+v", acc)
	}
	if len(az.asked) != 2 {
		t.Errorf("authorization asked %v", az.asked)
	}
	// Marked before the answer: list shows uninstalling; the record is Helm's, readable by Helm.
	rel, err := e.store.Get(ctx(t), "ns", "web", 2)
	if err != nil || rel.Info.Status != helmrelease.StatusUninstalling || rel.Info.Description != release.UninstallDescription ||
		rel.Config["replicas"] != float64(2) || len(rel.Chart.Templates) != 1 {
		t.Fatalf("revision 2 = %+v, %v", rel.Info, err)
	}
	sec, err := e.c.CoreV1().Secrets("ns").Get(ctx(t), release.SecretName("web", 2), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rev, _ := release.RevisionFromMeta(sec)
	if !rev.Ours || !rev.Queued || rev.RequestID != "req-1" || rev.Status != "uninstalling" {
		t.Errorf("labels %v: the sweeper would not see it as ours and queued", sec.Labels)
	}
	if len(e.sender.sent) != 1 {
		t.Fatalf("%d events sent", len(e.sender.sent))
	}
	ev := e.sender.sent[0]
	if err := events.Verify(ev, key, t0, time.Hour); err != nil {
		t.Errorf("unsigned: %v", err)
	}
	raw, _ := unbound(ev).MarshalJSON()
	if string(sec.Data[release.DataEvent]) != string(raw) {
		t.Error("the stored event is not the sent one")
	}
	a, err := events.ParseAccepted(ev)
	if err != nil || ev.Type() != events.TypeUninstallAccepted || a.Action != release.ActionUninstall || a.Revision != 2 ||
		a.Caller.User != "alice" || a.SecretName != release.SecretName("web", 2) {
		t.Errorf("event %s %+v, %v", ev.Type(), a, err)
	}

	// One action at a time: a second uninstall, an upgrade, a rollback are refused.
	if _, err := e.svc.Uninstall(ctx(t), "ns", "web", "", u); !errors.Is(err, release.ErrPending) {
		t.Errorf("second uninstall: %v", err)
	}
	if _, err := e.svc.Rollback(ctx(t), api.RollbackRequest{Name: "web", Namespace: "ns", Version: 1}, nil); !errors.Is(err, release.ErrPending) {
		t.Errorf("rollback while uninstalling: %v", err)
	}
}

func TestUninstallRefusals(t *testing.T) {
	e := newEnv(t)
	e.deploy("web", 1, helmrelease.StatusDeployed)
	for _, tc := range []struct {
		name, release, version string
		want                   error
	}{
		{"no release", "nope", "", release.ErrNotFound},
		{"no such revision (the console's check)", "web", "7", ErrRevisionNotFound},
		{"bad version", "web", "x", ErrInvalid},
		{"bad name", "Web!", "", ErrInvalid},
	} {
		if _, err := e.svc.Uninstall(ctx(t), "ns", tc.release, tc.version, nil); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	e.svc.Authorizer = &authz{}
	if _, err := e.svc.Uninstall(ctx(t), "ns", "web", "", &auth.User{Name: "bob"}); !errors.Is(err, auth.ErrForbidden) {
		t.Errorf("forbidden: %v", err)
	}
	if len(e.sender.sent) != 0 {
		t.Errorf("%d events sent by refusals", len(e.sender.sent))
	}
	if rel, _ := e.store.Get(ctx(t), "ns", "web", 1); rel.Info.Status != helmrelease.StatusDeployed {
		t.Errorf("a refusal changed the revision: %s", rel.Info.Status)
	}
}

// An uninstall nobody will act on is put back as it was.
func TestUninstallUnmarkedOnSendFailure(t *testing.T) {
	e := newEnv(t)
	e.deploy("web", 1, helmrelease.StatusDeployed)
	e.sender.err = errors.New("broker down")
	if _, err := e.svc.Uninstall(ctx(t), "ns", "web", "1", nil); !errors.Is(err, ErrNotAccepted) {
		t.Fatalf("err = %v", err)
	}
	sec, err := e.c.CoreV1().Secrets("ns").Get(ctx(t), release.SecretName("web", 1), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sec.Labels[release.LabelStatus] != "deployed" || sec.Labels[release.LabelQueued] != "" || len(sec.Data[release.DataEvent]) != 0 {
		t.Errorf("not put back: labels %v", sec.Labels)
	}
	if rel, _ := e.store.Get(ctx(t), "ns", "web", 1); rel.Info.Status != helmrelease.StatusDeployed {
		t.Errorf("record %s", rel.Info.Status)
	}
}

func TestRollbackReservesTheTargetsValues(t *testing.T) {
	e := newEnv(t)
	e.deploy("web", 1, helmrelease.StatusSuperseded)
	e.deploy("web", 2, helmrelease.StatusDeployed)

	if _, err := e.svc.Rollback(ctx(t), api.RollbackRequest{Name: "web", Namespace: "ns", Version: 5}, nil); !errors.Is(err, ErrRevisionNotFound) {
		t.Errorf("rollback to a missing revision: %v", err)
	}
	if _, err := e.svc.Rollback(ctx(t), api.RollbackRequest{Name: "nope", Namespace: "ns", Version: 1}, nil); !errors.Is(err, release.ErrNotFound) {
		t.Errorf("rollback of a missing release: %v", err)
	}
	acc, err := e.svc.Rollback(ctx(t), api.RollbackRequest{Name: "web", Namespace: "ns", Version: 1, Timeout: "2m"}, &auth.User{Name: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	if acc.Revision != 3 || acc.Secret.Name != release.SecretName("web", 3) || acc.Secret.Data != nil {
		t.Errorf("accepted %+v", acc)
	}
	rel, err := e.store.Get(ctx(t), "ns", "web", 3)
	if err != nil || rel.Info.Status != helmrelease.StatusPendingRollback || rel.Config["replicas"] != float64(1) ||
		rel.Manifest != "kind: ConfigMap" {
		t.Fatalf("reservation %+v config %v, %v", rel.Info, rel.Config, err)
	}
	a, err := events.ParseAccepted(e.sender.sent[0])
	if err != nil || a.Action != release.ActionRollback || a.RollbackTo != 1 || a.Revision != 3 ||
		a.Options.Timeout != 2*time.Minute || a.Caller.User != "alice" {
		t.Errorf("event %+v, %v", a, err)
	}
	// Pending: the next one is refused, like an upgrade.
	if _, err := e.svc.Rollback(ctx(t), api.RollbackRequest{Name: "web", Namespace: "ns"}, nil); !errors.Is(err, release.ErrPending) {
		t.Errorf("second rollback: %v", err)
	}
	// Version 0 is Helm's "the previous revision".
	e2 := newEnv(t)
	e2.deploy("db", 1, helmrelease.StatusSuperseded)
	e2.deploy("db", 2, helmrelease.StatusDeployed)
	if _, err := e2.svc.Rollback(ctx(t), api.RollbackRequest{Name: "db", Namespace: "ns"}, nil); err != nil {
		t.Fatal(err)
	}
	if a, _ := events.ParseAccepted(e2.sender.sent[0]); a.RollbackTo != 1 {
		t.Errorf("version 0 rolled back to %d", a.RollbackTo)
	}
}

// laggingCache is a Store whose cached history is the one it was given (nothing, or an
// older write).
type laggingCache struct {
	*release.Store
	cached []release.Revision
}

func (c laggingCache) History(context.Context, string, string) ([]release.Revision, error) {
	return c.cached, nil
}

// Await answers when the revision is final or gone, never from a cache that has not seen it
// yet, and at its context's end says the action still runs.
func TestAwait(t *testing.T) {
	e := newEnv(t)
	lag := laggingCache{Store: e.store}
	e.svc.Store = lag
	acc, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), nil)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx(t), 50*time.Millisecond)
	defer cancel()
	if _, gone, err := e.svc.Await(short, "ns", "web", acc.Revision, acc.RequestID, time.Millisecond); !errors.Is(err, ErrStillRunning) || gone {
		t.Fatalf("Await of a pending revision the cache has not seen: gone %v, %v", gone, err)
	}
	if _, err := e.store.MarkFailed(ctx(t), "ns", "web", 1, "boom", release.KeepFailed); err != nil {
		t.Fatal(err)
	}
	rev, gone, err := e.svc.Await(ctx(t), "ns", "web", 1, acc.RequestID, time.Millisecond)
	if err != nil || gone || rev.Status != "failed" {
		t.Errorf("Await of a failed revision: %+v gone %v, %v", rev, gone, err)
	}
	// An uninstall of it: the cache still holds the failed revision of the install's request.
	lag.cached, _ = e.store.LiveHistory(ctx(t), "ns", "web")
	e.svc.Store = lag
	e.svc.NewID = func() string { return "req-u" }
	u, err := e.svc.Uninstall(ctx(t), "ns", "web", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	short2, cancel2 := context.WithTimeout(ctx(t), 50*time.Millisecond)
	defer cancel2()
	if rev, _, err := e.svc.Await(short2, "ns", "web", 1, u.RequestID, time.Millisecond); !errors.Is(err, ErrStillRunning) {
		t.Errorf("Await of an uninstall answered from a stale cache: %+v, %v", rev, err)
	}
	if err := e.c.CoreV1().Secrets("ns").Delete(ctx(t), release.SecretName("web", 1), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	lag.cached = nil
	e.svc.Store = lag
	if _, gone, err := e.svc.Await(ctx(t), "ns", "web", 1, u.RequestID, time.Millisecond); err != nil || !gone {
		t.Errorf("Await of a deleted revision: gone %v, %v", gone, err)
	}
}
