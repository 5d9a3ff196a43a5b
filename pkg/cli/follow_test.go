package cli

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/progress"
)

var progressAt = time.Date(2026, 12, 2, 10, 0, 5, 0, time.UTC)

// step is one answer of GET /api/helm/release: a status and what the action is doing.
func step(st helmrelease.Status, desc string, p *progress.Progress) *api.Release {
	return &api.Release{Release: &helmrelease.Release{Name: "web", Namespace: "team", Version: 1,
		Info:  &helmrelease.Info{Status: st, LastDeployed: helmtime.Time{Time: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)}, Description: desc},
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "0.1.0", AppVersion: "1.0"}}}, Progress: p}
}

func prog(phase string, ready, total int, hook string, waiting []string, warnings ...string) *progress.Progress {
	return &progress.Progress{Phase: phase, Ready: ready, Total: total, Hook: hook, WaitingFor: waiting, Warnings: warnings, Updated: progressAt}
}

const (
	warnProbe = "Pod/web-7d9f-x2: Unhealthy: Readiness probe failed: connection refused"
	warnPull  = "Pod/web-7d9f-x2: BackOff: Back-off pulling image"
)

// installSteps is a whole install as submit shows it to a poller: queued, then each phase,
// polled more often than it changes (repeats must not print), with warnings coming in.
func installSteps(end *api.Release) []*api.Release {
	all := []string{"Deployment/web", "StatefulSet/db", "Job/web-migrate-1"}
	pi := helmrelease.StatusPendingInstall
	return []*api.Release{
		step(pi, "", nil),
		step(pi, "", nil),
		step(pi, "", prog(progress.PhaseFetching, 0, 0, "", nil)),
		step(pi, "", prog(progress.PhasePreHooks, 0, 0, "Job/web-secrets", nil)),
		step(pi, "", prog(progress.PhaseApplying, 0, 3, "", all)),
		step(pi, "", prog(progress.PhaseWaiting, 0, 3, "", all)),
		step(pi, "", prog(progress.PhaseWaiting, 0, 3, "", all, warnProbe)),
		step(pi, "", prog(progress.PhaseWaiting, 0, 3, "", all, warnProbe)),
		step(pi, "", prog(progress.PhaseWaiting, 1, 3, "", all[1:], warnPull, warnProbe)),
		step(pi, "", prog(progress.PhaseWaiting, 2, 3, "", all[2:], warnPull, warnProbe)),
		step(pi, "", prog(progress.PhasePostHooks, 3, 3, "Job/web-notify", nil, warnPull, warnProbe)),
		end,
	}
}

// scripted is a submit whose release goes through steps, one per GET (then stays at the
// last); it accepts the install and the cancel.
type scripted struct {
	mu      sync.Mutex
	steps   []*api.Release
	gets    int
	cancel  *api.Cancelled
	cancels int
}

func (s *scripted) serve(t *testing.T) *httptest.Server {
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.PathRelease, func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		rel := s.steps[min(s.gets, len(s.steps)-1)]
		s.gets++
		s.mu.Unlock()
		_ = json.NewEncoder(w).Encode(rel)
	})
	mux.HandleFunc("POST "+api.PathAsync, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v1", Namespace: "team",
			UID: "0b6c6c55-0000-4000-8000-000000000001", Labels: map[string]string{"name": "web", "status": "pending-install", "version": "1"}}})
	})
	mux.HandleFunc("POST "+api.PathCancel, func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.cancels++
		if s.cancel == nil {
			w.WriteHeader(http.StatusConflict)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "nothing to cancel: revision 1 of team/web is deployed"})
			return
		}
		code := http.StatusAccepted
		if s.cancel.Status == "failed" {
			code = http.StatusOK
		}
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(s.cancel)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// stepClock is a clock that moves 2 s each time it is read: follow reads it once at the
// start and once per poll, so the elapsed times in the output are the same on every run.
// (oc-helm reads it from one goroutine.)
func stepClock() *testingclock.SimpleIntervalClock {
	return &testingclock.SimpleIntervalClock{Time: time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC), Duration: 2 * time.Second}
}

// runCmd runs oc-helm against srv with out as its output, polling every millisecond.
func runCmd(t *testing.T, srv *httptest.Server, out io.Writer, args ...string) error {
	t.Helper()
	g := &Globals{IO: genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: out}, Clock: stepClock(), PollInterval: time.Millisecond}
	root := newRootCmd(g)
	root.SetArgs(append(args, "--server", srv.URL, "-n", "team", "--kubeconfig", os.DevNull))
	return root.Execute()
}

// The plain-line form (not a terminal): one line per change, no repeats, each warning once
// and oldest first, the final line with the reason when it failed.
func TestFollowPlainLines(t *testing.T) {
	deployed := step(helmrelease.StatusDeployed, "Install complete", nil)
	failed := step(helmrelease.StatusFailed, `Release "web" failed: cancelled by alice`, nil)
	for _, tc := range []struct {
		name, golden string
		steps        []*api.Release
		args         []string
		wantErr      string
	}{
		{"install --wait deployed", "follow-install-deployed.txt", installSteps(deployed),
			[]string{"install", "web", "https://charts.example.com/tiny-0.1.0.tgz", "--wait"}, ""},
		{"status --watch failed", "follow-status-failed.txt", installSteps(failed), []string{"status", "web", "--watch"},
			"release failed: web revision 1 is failed"},
		{"status --watch of a final release", "follow-status-final.txt", []*api.Release{deployed}, []string{"status", "web", "--watch"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scripted{steps: tc.steps}
			var out bytes.Buffer
			err := runCmd(t, s.serve(t), &out, tc.args...)
			if (err == nil) != (tc.wantErr == "") || (err != nil && err.Error() != tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if err != nil {
				out.WriteString("Error: " + err.Error() + "\n") // as main prints it
			}
			if s.gets < len(tc.steps) {
				t.Errorf("polled %d times, the script has %d steps", s.gets, len(tc.steps))
			}
			assertGolden(t, out.Bytes(), filepath.Join("testdata", tc.golden))
			if strings.ContainsAny(out.String(), "\r\033") {
				t.Error("terminal control characters in the plain form")
			}
		})
	}
}

func TestCancel(t *testing.T) {
	failed := step(helmrelease.StatusFailed, `Release "web" failed: cancelled by alice`, nil)
	deployed := step(helmrelease.StatusDeployed, "Install complete", nil)
	for _, tc := range []struct {
		name, golden string
		cancel       *api.Cancelled
		steps        []*api.Release
		args         []string
		wantErr      string
	}{
		{"running", "cancel-running.txt", &api.Cancelled{Name: "web", Namespace: "team", Revision: 1, Status: "cancelling"},
			installSteps(failed)[6:], []string{"cancel", "web"}, ""},
		{"running --wait", "cancel-running-wait.txt", &api.Cancelled{Name: "web", Namespace: "team", Revision: 1, Status: "cancelling"},
			installSteps(failed)[6:], []string{"cancel", "web", "--wait"}, ""},
		{"not started", "cancel-not-started.txt", &api.Cancelled{Name: "web", Namespace: "team", Revision: 1, Status: "failed"},
			[]*api.Release{failed}, []string{"cancel", "web", "--wait"}, ""},
		{"json", "cancel-running.json", &api.Cancelled{Name: "web", Namespace: "team", Revision: 1, Status: "cancelling"},
			[]*api.Release{failed}, []string{"cancel", "web", "-o", "json"}, ""},
		{"too late", "cancel-too-late.txt", &api.Cancelled{Name: "web", Namespace: "team", Revision: 1, Status: "cancelling"},
			installSteps(deployed)[9:], []string{"cancel", "web", "--wait"}, "not cancelled: web revision 1 is deployed"},
		{"nothing pending", "cancel-nothing.txt", nil, []*api.Release{deployed}, []string{"cancel", "web"},
			"nothing to cancel: revision 1 of team/web is deployed (HTTP 409)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scripted{steps: tc.steps, cancel: tc.cancel}
			var out bytes.Buffer
			err := runCmd(t, s.serve(t), &out, tc.args...)
			if (err == nil) != (tc.wantErr == "") || (err != nil && err.Error() != tc.wantErr) {
				t.Fatalf("error %v, want %q", err, tc.wantErr)
			}
			if err != nil {
				out.WriteString("Error: " + err.Error() + "\n") // as main prints it
			}
			if s.cancels != 1 {
				t.Errorf("%d cancel requests, want 1", s.cancels)
			}
			waited := len(tc.args) > 2 && tc.args[2] == "--wait" && tc.cancel != nil && tc.cancel.Status == "cancelling"
			if waited != (s.gets > 0) {
				t.Errorf("%d polls (wait %v)", s.gets, waited)
			}
			assertGolden(t, out.Bytes(), filepath.Join("testdata", tc.golden))
		})
	}
}

// `status NAME` of a pending release prints its progress block; of a final one, none.
func TestStatusShowsProgress(t *testing.T) {
	pending := step(helmrelease.StatusPendingUpgrade, "Preparing upgrade",
		prog(progress.PhaseWaiting, 1, 3, "Job/web-notify", []string{"StatefulSet/db", "Job/web-migrate-1"}, warnPull, warnProbe))
	stale := step(helmrelease.StatusDeployed, "Upgrade complete", prog(progress.PhaseWaiting, 3, 3, "", nil))
	for _, tc := range []struct {
		golden string
		rel    *api.Release
		format string
	}{
		{"status-progress.txt", pending, "table"},
		{"status-progress.yaml", pending, "yaml"},
		{"status-progress-final.txt", stale, "table"},
	} {
		t.Run(tc.golden, func(t *testing.T) {
			s := &scripted{steps: []*api.Release{tc.rel}}
			var out bytes.Buffer
			if err := runCmd(t, s.serve(t), &out, "status", "web", "-o", tc.format); err != nil {
				t.Fatal(err)
			}
			assertGolden(t, out.Bytes(), filepath.Join("testdata", tc.golden))
		})
	}
}

// The bar line on its own: the bar fills with ready/total, and the line never runs past the
// terminal's width however much it waits on.
func TestBarLine(t *testing.T) {
	many := []string{"Deployment/gitlab-webservice-default", "Deployment/gitlab-sidekiq-all-in-1-v2", "StatefulSet/gitlab-gitaly"}
	rel := step(helmrelease.StatusPendingInstall, "", prog(progress.PhaseWaiting, 6, 9, "", many))
	line := barLine("gitlab", rel, 83*time.Second, '⠋')
	if want := "⠋ gitlab [█████████████░░░░░░░] 6/9 waiting  1m23s  waiting for Deployment/gitlab-webservice-default, "; !strings.HasPrefix(line, want) {
		t.Errorf("bar line\n%q\nwant prefix\n%q", line, want)
	}
	for _, width := range []int{1, 10, 40, 79, 200} {
		got := truncate(line, width)
		if n := utf8.RuneCountInString(got); n > width {
			t.Errorf("width %d: %d columns: %q", width, n, got)
		}
		if width < utf8.RuneCountInString(line) && !strings.HasSuffix(got, "…") {
			t.Errorf("width %d: cut without an ellipsis: %q", width, got)
		}
	}
	if got := truncate(line, 200); got != line {
		t.Errorf("a line that fits was cut: %q", got)
	}
	empty := barLine("web", step(helmrelease.StatusPendingInstall, "", prog(progress.PhaseFetching, 0, 0, "", nil)), 0, '⠋')
	if !strings.Contains(empty, "[░░░░░░░░░░░░░░░░░░░░] 0/0 fetching chart") {
		t.Errorf("no workloads yet: %q", empty)
	}
	queued := barLine("web", step(helmrelease.StatusPendingInstall, "", nil), 3*time.Second, '⠋')
	if queued != "⠋ web pending-install, revision 1  3s" {
		t.Errorf("queued: %q", queued)
	}
	hook := barLine("web", step(helmrelease.StatusPendingInstall, "", prog(progress.PhasePreHooks, 0, 0, "Job/web-secrets", nil)), 0, '⠋')
	if !strings.HasSuffix(hook, "pre hooks  0s  hook Job/web-secrets") {
		t.Errorf("hook: %q", hook)
	}
}

// Following stopped early (Ctrl-C): on a terminal the last frame stays and its line is
// ended, so the error is printed below it rather than over it.
func TestInterruptedBar(t *testing.T) {
	var b bytes.Buffer
	v := &barView{w: &b, name: "web", width: func() int { return 80 }, warned: map[string]bool{}}
	v.interrupted()
	if b.Len() != 0 {
		t.Errorf("before any frame: %q", b.String())
	}
	v.pending(step(helmrelease.StatusPendingInstall, "", prog(progress.PhaseWaiting, 1, 2, "", []string{"Deployment/web"})), time.Second)
	v.interrupted()
	if got := b.String(); !strings.HasPrefix(got, eraseLine+"⠋ web [") || !strings.HasSuffix(got, "waiting for Deployment/web\n") {
		t.Errorf("interrupted: %q", got)
	}
}
