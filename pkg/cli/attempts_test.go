package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"path/filepath"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/progress"
)

// attemptAt is revision v pending, its progress naming the attempt.
func attemptAt(v int, attempt string) *api.Release {
	r := stepAt(v, helmrelease.StatusPendingInstall, "")
	r.Progress = prog(progress.PhasePostHooks, 0, 0, "Job/web-post", nil)
	r.Progress.Attempt = attempt
	return r
}

func stepAt(v int, st helmrelease.Status, desc string) *api.Release {
	r := step(st, desc, nil)
	r.Version = v
	return r
}

// install --wait --retries follows the request through its attempts: a failed revision is
// watched for the executor's note (it comes just after Helm's failure), the retry revision
// is followed to its end.
func TestFollowAttempts(t *testing.T) {
	pi, failed := helmrelease.StatusPendingInstall, helmrelease.StatusFailed
	helmFailed := `Release "web" failed: job web-post failed: BackoffLimitExceeded`
	for _, tc := range []struct {
		name, golden string
		steps        []*api.Release
		wantErr      string
	}{
		{"retried then deployed", "follow-attempts-deployed.txt", []*api.Release{
			stepAt(1, pi, ""),
			stepAt(1, failed, helmFailed),
			stepAt(1, failed, helmFailed),
			stepAt(2, pi, ""),
			attemptAt(2, "2 of 3"),
			stepAt(2, failed, helmFailed+" (attempt 2 of 3; retried as revision 3)"),
			stepAt(3, pi, ""),
			stepAt(3, helmrelease.StatusDeployed, "Install complete (attempt 3 of 3)"),
		}, ""},
		{"the last attempt failed", "follow-attempts-failed.txt", []*api.Release{
			stepAt(1, pi, ""),
			stepAt(1, failed, helmFailed+" (attempt 1 of 2; retried as revision 2)"),
			stepAt(2, pi, ""),
			stepAt(2, failed, helmFailed),
			stepAt(2, failed, helmFailed+" (attempt 2 of 2)"),
		}, "release failed: web revision 2 is failed"},
		{"deployed by the remediation's rollback, unseen failure", "follow-attempts-remediated.txt", []*api.Release{
			stepAt(1, pi, ""),
			stepAt(2, helmrelease.StatusDeployed, "Rollback to 0"),
		}, "release failed: web revision 2 is deployed: Rollback to 0"},
		{"no note comes (cancelled)", "follow-attempts-nonote.txt", []*api.Release{
			stepAt(1, pi, ""),
			stepAt(1, failed, `Release "web" failed: cancelled by alice`),
		}, "release failed: web revision 1 is failed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &scripted{steps: tc.steps}
			var out bytes.Buffer
			err := runCmd(t, s.serve(t), &out, "install", "web", "https://charts.example.com/tiny-0.1.0.tgz", "--wait", "--retries", "2")
			if (err == nil) != (tc.wantErr == "") || (err != nil && err.Error() != tc.wantErr) {
				t.Fatalf("error %v, want %q\n%s", err, tc.wantErr, out.String())
			}
			if s.gets < len(tc.steps) {
				t.Errorf("polled %d times, the script has %d steps", s.gets, len(tc.steps))
			}
			assertGolden(t, out.Bytes(), filepath.Join("testdata", tc.golden))
		})
	}
}

// A request remediated by uninstall ends when its release is gone (404): exit 1, saying so,
// also when the polls never saw the failed attempt.
func TestFollowAttemptsUninstalled(t *testing.T) {
	for name, steps := range map[string][]*api.Release{
		"seen failing": {
			stepAt(1, helmrelease.StatusPendingInstall, ""),
			stepAt(1, helmrelease.StatusFailed, `Release "web" failed: hook (attempt 1 of 1; remediated by uninstall)`),
			stepAt(1, helmrelease.StatusUninstalling, "Deletion in progress"),
		},
		"gone between two polls": {stepAt(1, helmrelease.StatusPendingInstall, "")},
	} {
		t.Run(name, func(t *testing.T) {
			var out bytes.Buffer
			err := runCmd(t, goneAfterSteps(t, steps), &out, "install", "web", "https://charts.example.com/tiny-0.1.0.tgz",
				"--wait", "--remediation", "uninstall")
			if err == nil || err.Error() != "release failed: web was uninstalled (remediated by uninstall)" {
				t.Fatalf("error %v\n%s", err, out.String())
			}
		})
	}
}

// goneAfterSteps is a scripted submit whose release is gone (404) after its steps.
func goneAfterSteps(t *testing.T, steps []*api.Release) *httptest.Server {
	s := &scripted{steps: steps}
	proxy := httputil.NewSingleHostReverseProxy(mustURL(t, s.serve(t).URL))
	gone := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		done := r.Method == http.MethodGet && s.gets >= len(steps)
		s.mu.Unlock()
		if !done {
			proxy.ServeHTTP(w, r)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(api.Error{Error: "release: not found"})
	}))
	t.Cleanup(gone.Close)
	return gone
}

func mustURL(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
