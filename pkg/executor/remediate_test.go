package executor

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/async-helm/async-helm/internal/testwait"
	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/consumed"
	"github.com/async-helm/async-helm/pkg/release/lease"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// verbHelm is the fake Helm with the verb of each call.
type verbHelm struct {
	*fakeHelm
	mu    sync.Mutex
	verbs []string
	// client, when set, is the client "as the caller" (impersonation is not faked).
	client kubernetes.Interface
}

func (h *verbHelm) Client(opts ...helmexec.Option) (kubernetes.Interface, error) {
	if h.client != nil {
		return h.client, nil
	}
	return h.fakeHelm.Client(opts...)
}

func (h *verbHelm) note(verb string, req helmexec.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.verbs = append(h.verbs, fmt.Sprintf("%s v%d", verb, req.Revision))
}

func (h *verbHelm) Install(ctx context.Context, req helmexec.Request, opts ...helmexec.Option) (*helmrelease.Release, error) {
	h.note("install", req)
	return h.fakeHelm.Install(ctx, req, opts...)
}

func (h *verbHelm) Upgrade(ctx context.Context, req helmexec.Request, opts ...helmexec.Option) (*helmrelease.Release, error) {
	h.note("upgrade", req)
	return h.fakeHelm.Upgrade(ctx, req, opts...)
}

func (h *verbHelm) Rollback(ctx context.Context, req helmexec.Request, opts ...helmexec.Option) (*helmrelease.Release, error) {
	h.note("rollback", req)
	return h.fakeHelm.Rollback(ctx, req, opts...)
}

func (h *verbHelm) Uninstall(ctx context.Context, req helmexec.Request, opts ...helmexec.Option) (*helmrelease.Release, error) {
	h.note("uninstall", req)
	return h.fakeHelm.Uninstall(ctx, req, opts...)
}

// remEnv is an env whose fake Helm fails its first failures calls as Helm does (the
// adopted revision written failed), then deploys.
func remEnv(t *testing.T, failures int) (*env, *verbHelm) {
	e := newEnv(t, 2)
	vh := &verbHelm{fakeHelm: e.helm}
	e.svc.Helm = vh
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		d := storage.NewSecrets(e.c.CoreV1().Secrets(req.Namespace))
		key := release.SecretName(req.Name, req.Revision)
		rel, err := d.Get(key)
		if err != nil {
			return nil, err
		}
		if int(e.helm.calls.Load()) <= failures {
			rel.Info.Status, rel.Info.Description = helmrelease.StatusFailed, fmt.Sprintf("Release %q failed: hook failed", req.Name)
			return rel, errors.Join(d.Update(key, rel), errors.New("pre-install hook failed"))
		}
		rel.Info.Status, rel.Info.Description = helmrelease.StatusDeployed, req.Description
		return rel, d.Update(key, rel)
	}
	return e, vh
}

func (e *env) rev(name string, v int) *helmrelease.Release {
	e.t.Helper()
	rel, err := e.store.Get(ctx(e.t), "ns", name, v)
	if err != nil {
		e.t.Fatalf("revision %d: %v", v, err)
	}
	return rel
}

func (e *env) noLeases() {
	e.t.Helper()
	if l, err := e.c.CoordinationV1().Leases("ns").List(ctx(e.t), metav1.ListOptions{}); err != nil || len(l.Items) != 0 {
		e.t.Errorf("leases left: %d, %v", len(l.Items), err)
	}
}

// An install that fails twice with retries 3 succeeds on its third attempt: each attempt is
// its own revision under the request's id, the failed ones say where the request went on.
func TestInstallRetriedUntilItSucceeds(t *testing.T) {
	e, vh := remEnv(t, 2)
	a := e.reserve("web", "req-1")
	a.Options.Retries = 3
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeDeployed {
		t.Fatalf("Handle = %s, %v", got, err)
	}
	if want := "install v1,install v2,install v3"; strings.Join(vh.verbs, ",") != want {
		t.Fatalf("Helm ran %v, want %s", vh.verbs, want)
	}
	for i, req := range e.helm.reqs {
		if req.Replace != (i > 0) || req.Labels[release.LabelRequestID] != "req-1" || req.Labels[release.LabelRevision] != fmt.Sprint(i+1) {
			t.Errorf("attempt %d: replace %v, labels %v", i+1, req.Replace, req.Labels)
		}
	}
	for v, want := range map[int]string{1: "(attempt 1 of 4; retried as revision 2)", 2: "(attempt 2 of 4; retried as revision 3)"} {
		if rel := e.rev("web", v); rel.Info.Status != helmrelease.StatusFailed || !strings.HasSuffix(rel.Info.Description, want) {
			t.Errorf("revision %d: %s %q, want failed ... %q", v, rel.Info.Status, rel.Info.Description, want)
		}
	}
	if rel := e.rev("web", 3); rel.Info.Status != helmrelease.StatusDeployed || rel.Info.Description != "Install complete (attempt 3 of 4)" {
		t.Errorf("revision 3: %s %q", rel.Info.Status, rel.Info.Description)
	}
	steps, err := e.consumed.StepsOf(ctx(t), "req-1")
	if err != nil || steps != (consumed.Steps{Attempt: 3, AttemptRevision: 3}) {
		t.Errorf("steps %+v, %v", steps, err)
	}
	e.noLeases()
	// A redelivery of the event finds revision 1 final: nothing runs again.
	if got, _ := e.svc.Handle(ctx(t), context.Background(), a, nil); got != OutcomeDuplicate || len(vh.verbs) != 3 {
		t.Errorf("redelivery: %s, Helm ran %v", got, vh.verbs)
	}
}

// Retries run out: the last failure stays, saying it was the last attempt.
func TestRetriesRunOut(t *testing.T) {
	e, vh := remEnv(t, 10)
	a := e.reserve("web", "req-1")
	a.Options.Retries = 1
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeFailed {
		t.Fatalf("Handle = %s, %v", got, err)
	}
	if len(vh.verbs) != 2 {
		t.Fatalf("Helm ran %v", vh.verbs)
	}
	if rel := e.rev("web", 2); !strings.HasSuffix(rel.Info.Description, "(attempt 2 of 2)") {
		t.Errorf("revision 2: %q", rel.Info.Description)
	}
	e.noLeases()
}

// A retry another executor already claimed is never run a second time.
func TestClaimedRetryIsNotRunAgain(t *testing.T) {
	e, vh := remEnv(t, 10)
	a := e.reserve("web", "req-1")
	a.Options.Retries = 3
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		// Meanwhile, another executor claimed attempt 2 (the record is async-helm's own).
		if err := e.consumed.ClaimStep(ctx, "req-1", consumed.Step{Attempt: 2, Revision: 2}); err != nil {
			t.Error(err)
		}
		return nil, errors.New("pre-install hook failed")
	}
	if got, _ := e.svc.Handle(ctx(t), context.Background(), a, nil); got != OutcomeFailed || len(vh.verbs) != 1 {
		t.Fatalf("Handle = %s, Helm ran %v", got, vh.verbs)
	}
	if _, err := e.store.Get(ctx(t), "ns", "web", 2); !errors.Is(err, release.ErrNotFound) {
		t.Errorf("revision 2 reserved: %v", err)
	}
	e.noLeases()
}

// An upgrade that fails with remediation rollback ends with the previous release deployed
// again, as a new revision; history keeps the failed attempt.
func TestUpgradeRemediatedByRollback(t *testing.T) {
	e, vh := remEnv(t, 1)
	a := e.remediatedUpgrade()
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeFailed {
		t.Fatalf("Handle = %s, %v", got, err)
	}
	if want := "upgrade v2,rollback v3"; strings.Join(vh.verbs, ",") != want {
		t.Fatalf("Helm ran %v, want %s", vh.verbs, want)
	}
	if req := e.helm.reqs[1]; req.RollbackTo != 1 || req.Labels[release.LabelRequestID] != "req-u" {
		t.Errorf("rollback asked %+v", req)
	}
	if rel := e.rev("web", 2); rel.Info.Status != helmrelease.StatusFailed ||
		!strings.HasSuffix(rel.Info.Description, "(attempt 1 of 1; remediated by rollback to 1 as revision 3)") {
		t.Errorf("revision 2: %s %q", rel.Info.Status, rel.Info.Description)
	}
	if rel := e.rev("web", 3); rel.Info.Status != helmrelease.StatusDeployed {
		t.Errorf("revision 3: %s", rel.Info.Status)
	}
	if steps, _ := e.consumed.StepsOf(ctx(t), "req-u"); steps.Remediation != "rollback" {
		t.Errorf("steps %+v", steps)
	}
	e.noLeases()
}

// Remediation uninstall runs Helm's uninstall once, after the last failed attempt.
func TestInstallRemediatedByUninstall(t *testing.T) {
	e, vh := remEnv(t, 10)
	a := e.reserve("web", "req-1")
	a.Options.Retries, a.Options.Remediation = 1, "uninstall"
	if got, _ := e.svc.Handle(ctx(t), context.Background(), a, nil); got != OutcomeFailed {
		t.Fatalf("Handle = %s", got)
	}
	if want := "install v1,install v2,uninstall v2"; strings.Join(vh.verbs, ",") != want {
		t.Fatalf("Helm ran %v, want %s", vh.verbs, want)
	}
	e.noLeases()
}

// What follows a failed attempt.
func TestDecide(t *testing.T) {
	live, dead := context.Background(), func() context.Context {
		c, cancel := context.WithCancel(context.Background())
		cancel()
		return c
	}()
	for _, tc := range []struct {
		name     string
		kind     endKind
		err      error
		attempt  int
		shutdown context.Context
		want     step
	}{
		{"a failure, attempts left", notEnded, errors.New("hook failed"), 1, live, stepRetry},
		{"timed out, attempts left", endTimeout, errors.New("context canceled"), 2, live, stepRetry},
		{"the last attempt", notEnded, errors.New("hook failed"), 3, live, stepRemediate},
		{"the render bound", notEnded, helmexec.ErrRenderTimeout, 1, live, stepRemediate},
		{"the chart changed", notEnded, helmexec.ErrChartChanged, 1, live, stepRemediate},
		{"no rollback pin", notEnded, helmexec.ErrNoRollbackPin, 1, live, stepRemediate},
		{"the chart's manifests too large", notEnded, fmt.Errorf("render: %w", helmexec.ErrManifestsTooLarge), 1, live, stepRemediate},
		{"an oversized record", notEnded, fmt.Errorf("upgrade: %w", storage.ErrManifestsTooLarge), 1, live, stepRemediate},
		{"cancelled", endCancel, errors.New("x"), 1, live, stepStop},
		{"lease lost", endLost, errors.New("x"), 1, live, stepStop},
		{"executor shut down", endShutdown, errors.New("x"), 1, live, stepStop},
		{"shutting down", notEnded, errors.New("x"), 1, dead, stepStop},
	} {
		t.Run(tc.name, func(t *testing.T) {
			end := &ending{fence: &helmexec.Fence{}, cancel: func() {}}
			if tc.kind != notEnded {
				end.end(tc.kind, "")
			}
			act := &action{end: end, attempt: tc.attempt}
			if got := afterFailure(act, result{err: tc.err}, tc.shutdown, 3); got != tc.want {
				t.Errorf("afterFailure = %d, want %d", got, tc.want)
			}
		})
	}
}

// A tenant who writes the next revision while the attempt runs (hostile input: the
// namespace's Secrets) gets no retry run on it: the latest must be the failed attempt.
func TestNoRetryOnARevisionSomeoneElseWrote(t *testing.T) {
	e, vh := remEnv(t, 10)
	a := e.reserve("web", "req-1")
	a.Options.Retries = 3
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		e.deployRev("web", 2, helmrelease.StatusFailed)
		return nil, errors.New("post-install hook failed")
	}
	if got, _ := e.svc.Handle(ctx(t), context.Background(), a, nil); got != OutcomeFailed || len(vh.verbs) != 1 {
		t.Fatalf("Handle = %s, Helm ran %v", got, vh.verbs)
	}
	if rel := e.rev("web", 2); rel.Labels[release.LabelRequestID] != "" {
		t.Errorf("the tenant's revision 2 was taken: %v", rel.Labels)
	}
	if rel := e.rev("web", 1); !strings.Contains(rel.Info.Description, "(attempt 1 of 4; not retried: revision 1 is no longer") {
		t.Errorf("revision 1: %q", rel.Info.Description)
	}
	if steps, _ := e.consumed.StepsOf(ctx(t), "req-1"); steps.Attempt != 1 {
		t.Errorf("a retry was claimed: %+v", steps)
	}
	e.noLeases()
}

// A retry's progress on its Lease says which attempt of the request it is.
func TestRetryProgressSaysTheAttempt(t *testing.T) {
	e, _ := remEnv(t, 1)
	e.svc.ProgressInterval = 5 * time.Millisecond
	fail := e.helm.run
	seen := make(chan string, 1)
	e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
		if req.Revision == 2 {
			var p *progress.Progress
			testwait.For(t, func() bool {
				l, err := e.c.CoordinationV1().Leases("ns").Get(ctx, release.LeaseName("web", 2), metav1.GetOptions{})
				if err == nil {
					p, _ = progress.Decode(l.Annotations[lease.AnnotationProgress])
				}
				return p != nil
			})
			seen <- p.Attempt
		}
		return fail(ctx, req)
	}
	a := e.reserve("web", "req-1")
	a.Options.Retries = 3
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeDeployed {
		t.Fatalf("Handle = %s, %v", got, err)
	}
	if got := <-seen; got != "2 of 4" {
		t.Errorf("attempt in the progress: %q, want \"2 of 4\"", got)
	}
}

// A retry's revision is reserved as the caller (the executor's role may not create
// Secrets): without a client as the caller there is no retry, and the failure says why.
func TestRetryReservesAsTheCaller(t *testing.T) {
	for _, asCaller := range []bool{true, false} {
		t.Run(fmt.Sprint("client as the caller: ", asCaller), func(t *testing.T) {
			e, vh := remEnv(t, 1)
			if asCaller {
				vh.client = e.c
			}
			a := e.reserve("web", "req-1")
			a.Options.Retries, a.Caller = 1, events.Caller{User: "alice"}
			got, _ := e.svc.Handle(ctx(t), context.Background(), a, nil)
			if asCaller && (got != OutcomeDeployed || len(vh.verbs) != 2) {
				t.Fatalf("Handle = %s, Helm ran %v", got, vh.verbs)
			}
			if !asCaller && (got != OutcomeFailed || len(vh.verbs) != 1 ||
				!strings.Contains(e.rev("web", 1).Info.Description, "not retried: a client as alice")) {
				t.Fatalf("Handle = %s, Helm ran %v, revision 1 %q", got, vh.verbs, e.rev("web", 1).Info.Description)
			}
			e.noLeases()
		})
	}
}

// A failed attempt at the largest revision is not retried past it: the chain takes its next
// revision from release.NextAfter, as every reservation does, and the step stays unclaimed.
func TestNoRetryPastTheLargestRevision(t *testing.T) {
	e, vh := remEnv(t, 10)
	if _, err := e.store.Reserve(ctx(t), release.Reservation{Namespace: "ns", Name: "web", Action: release.ActionInstall,
		Chart: &chart.Metadata{Name: "tiny", Version: "1.0.0"}, RequestID: "req-1", Revision: release.MaxRevision}); err != nil {
		t.Fatal(err)
	}
	a := events.Action{Action: release.ActionInstall, Namespace: "ns", Name: "web", Revision: release.MaxRevision,
		SecretName: release.SecretName("web", release.MaxRevision), RequestID: "req-1",
		Chart: chartref.Ref{URL: "https://charts.example/tiny-1.0.0.tgz"}, Options: events.Options{Timeout: 5 * time.Minute}}
	a.Options.Retries = 2
	if got, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil || got != OutcomeFailed {
		t.Fatalf("Handle = %s, %v", got, err)
	}
	if want := fmt.Sprintf("install v%d", release.MaxRevision); strings.Join(vh.verbs, ",") != want {
		t.Fatalf("Helm ran %v, want %s", vh.verbs, want)
	}
	rel := e.rev("web", release.MaxRevision)
	if rel.Info.Status != helmrelease.StatusFailed || !strings.Contains(rel.Info.Description, "not retried") ||
		!strings.Contains(rel.Info.Description, "revision out of range") {
		t.Errorf("revision %d: %s %q, want failed, not retried: revision out of range", release.MaxRevision, rel.Info.Status, rel.Info.Description)
	}
	if steps, err := e.consumed.StepsOf(ctx(t), "req-1"); err != nil || steps.Attempt > 1 || steps.AttemptRevision != 0 {
		t.Errorf("steps %+v, %v: want no retry claimed", steps, err)
	}
	secrets, err := e.c.CoreV1().Secrets("ns").List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range secrets.Items {
		if strings.HasPrefix(s.Name, "sh.helm.release.v1.web.") && s.Name != release.SecretName("web", release.MaxRevision) {
			t.Errorf("secret %s reserved past the largest revision", s.Name)
		}
	}
}
