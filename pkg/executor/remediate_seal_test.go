package executor

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/signing"
)

// sealHelm is the fake Helm that notes, per run, the Secret the run's writes are sealed for.
type sealHelm struct {
	*verbHelm
	mu    sync.Mutex
	seals []string // "<verb> v<revision>: <secret name> <uid>"
}

func (h *sealHelm) seal(verb string, req helmexec.Request, opts []helmexec.Option) {
	s, ok := helmexec.DeployerSealOf(opts...)
	h.mu.Lock()
	defer h.mu.Unlock()
	if !ok {
		h.seals = append(h.seals, fmt.Sprintf("%s v%d: not sealed", verb, req.Revision))
		return
	}
	h.seals = append(h.seals, fmt.Sprintf("%s v%d: %s %s", verb, req.Revision, s.Secret.Name, s.Secret.UID))
}

func (h *sealHelm) Install(ctx context.Context, req helmexec.Request, opts ...helmexec.Option) (*helmrelease.Release, error) {
	h.seal("install", req, opts)
	return h.verbHelm.Install(ctx, req, opts...)
}

func (h *sealHelm) Upgrade(ctx context.Context, req helmexec.Request, opts ...helmexec.Option) (*helmrelease.Release, error) {
	h.seal("upgrade", req, opts)
	return h.verbHelm.Upgrade(ctx, req, opts...)
}

func (h *sealHelm) Rollback(ctx context.Context, req helmexec.Request, opts ...helmexec.Option) (*helmrelease.Release, error) {
	h.seal("rollback", req, opts)
	return h.verbHelm.Rollback(ctx, req, opts...)
}

// Each revision a request writes, its retries and its remediation rollback too, is sealed
// for the Secret that revision is in: a step sealed for the first revision's Secret never
// verifies, and its delete hooks would never run, even for their writer.
func TestEveryStepIsSealedForItsOwnSecret(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fails int
		want  []string
		act   func(e *env) events.Action
	}{
		{name: "retried install", fails: 2, want: []string{"install v1", "install v2", "install v3"},
			act: func(e *env) events.Action {
				a := e.reserve("web", "req-1")
				a.Options.Retries = 2
				return a
			}},
		{name: "remediation rollback", fails: 1, want: []string{"upgrade v2", "rollback v3"},
			act: func(e *env) events.Action { return e.remediatedUpgrade() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, vh := remEnv(t, tc.fails)
			sh := &sealHelm{verbHelm: vh}
			e.svc.Helm, e.svc.SealKey = sh, signing.Key("0123456789abcdef0123456789abcdef")
			a := tc.act(e)
			first, err := e.c.CoreV1().Secrets("ns").Get(ctx(t), a.SecretName, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			a.BoundSecretUID = first.UID
			if _, err := e.svc.Handle(ctx(t), context.Background(), a, nil); err != nil {
				t.Fatalf("Handle: %v", err)
			}
			var want []string
			for _, run := range tc.want {
				var v int
				fmt.Sscanf(run[strings.Index(run, " v")+2:], "%d", &v)
				name := fmt.Sprintf("sh.helm.release.v1.web.v%d", v)
				sec, err := e.c.CoreV1().Secrets("ns").Get(ctx(t), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				want = append(want, fmt.Sprintf("%s: %s %s", run, name, sec.UID))
			}
			if got := strings.Join(sh.seals, "\n"); got != strings.Join(want, "\n") {
				t.Errorf("the runs were sealed for\n%s\nwant\n%s", got, strings.Join(want, "\n"))
			}
		})
	}
}
