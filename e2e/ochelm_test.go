package e2e

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/creack/pty"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/testcluster"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

func TestOcHelmInstallListUpgradeAndWait(t *testing.T) {
	ns := cluster.Namespace(t)
	s := newStack(t, ns)
	tiny := s.charts.ChartURL("tiny", "0.1.0")

	out, code := s.ocHelm(t, "-n", ns, "install", "web", tiny, "--set", "replicas=2")
	if code != 0 {
		t.Fatalf("install: exit %d\n%s", code, out)
	}
	sec, err := cluster.Client.CoreV1().Secrets(ns).Get(context.Background(), "sh.helm.release.v1.web.v1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"NAME: web", "REVISION: 1", "STATUS: pending-install", "RELEASE SECRET: " + sec.Name, "SECRET UID: " + string(sec.UID)} {
		if !strings.Contains(out, want) {
			t.Errorf("install output lacks %q:\n%s", want, out)
		}
	}
	out, _ = s.ocHelm(t, "-n", ns, "list")
	if !strings.Contains(out, "NAME") || !strings.Contains(out, "APP VERSION") || !strings.Contains(out, "web") {
		t.Errorf("list:\n%s", out)
	}
	// status --watch follows it to deployed and exits 0.
	out, code = s.ocHelm(t, "-n", ns, "status", "web", "--watch")
	if code != 0 || !strings.Contains(out, "web: deployed, revision 1") {
		t.Fatalf("status --watch: exit %d\n%s", code, out)
	}
	out, _ = s.ocHelm(t, "-n", ns, "list")
	if !regexpLine(out, "web", ns, "1", "deployed", "tiny-0.1.0", "1.0") {
		t.Errorf("list after deploy:\n%s", out)
	}

	// Values merge as helm merges them: file, then --set, then --set-string.
	vf := filepath.Join(t.TempDir(), "v.yaml")
	if err := os.WriteFile(vf, []byte("message: from-file\nreplicas: 3\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code = s.ocHelm(t, "-n", ns, "upgrade", "web", tiny, "-f", vf, "--set", "replicas=1", "--set-string", "message=12345", "--wait")
	if code != 0 || !strings.Contains(out, "REVISION: 2") || !strings.Contains(out, "STATUS: pending-upgrade") || !strings.Contains(out, "web: deployed, revision 2") {
		t.Fatalf("upgrade --wait: exit %d\n%s", code, out)
	}
	cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "web-config", metav1.GetOptions{})
	if err != nil || cm.Data["message"] != "12345" {
		t.Errorf("message after upgrade: %v %v", cm.Data, err)
	}
	dep, err := cluster.Client.AppsV1().Deployments(ns).Get(context.Background(), "web", metav1.GetOptions{})
	if err != nil || *dep.Spec.Replicas != 1 {
		t.Errorf("replicas after upgrade: %v %v", dep.Spec.Replicas, err)
	}
	out, _ = s.ocHelm(t, "-n", ns, "history", "web", "-o", "json")
	if !strings.Contains(out, `"status":"superseded"`) || !strings.Contains(out, `"revision":2`) { // helm's compact JSON
		t.Errorf("history:\n%s", out)
	}

	// A failing install with --wait exits non-zero with the reason.
	out, code = s.ocHelm(t, "-n", ns, "install", "bad", s.charts.ChartURL("hookfail", "0.1.0"), "--wait")
	if code == 0 || !strings.Contains(out, "BackoffLimitExceeded") {
		t.Fatalf("failing install --wait: exit %d\n%s", code, out)
	}
	// A clear one-line error for a 409.
	out, code = s.ocHelm(t, "-n", ns, "install", "web", tiny)
	if code == 0 || !strings.Contains(out, "Error: ") || !strings.Contains(out, "(HTTP 409)") || strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("install of a name in use: exit %d\n%s", code, out)
	}

	// The notifier told subscribers, in order, for the first revision.
	evs := s.sink.WaitFor(t, 20*time.Second, "events of web v1", func(e []cloudevents.Event) bool {
		return index(e, events.StatusEventID(ns, "web", 1, "deployed", sec.Labels[release.LabelRequestID])) >= 0
	})
	if p, d := index(evs, events.StatusEventID(ns, "web", 1, "pending-install", sec.Labels[release.LabelRequestID])), index(evs, events.StatusEventID(ns, "web", 1, "deployed", sec.Labels[release.LabelRequestID])); p < 0 || p > d {
		t.Errorf("pending-install at %d, deployed at %d", p, d)
	}

	// Each function counts what it did, for Prometheus.
	for url, want := range map[string]string{
		s.submit.URL:   `asynchelm_submit_http_requests_total{code="201",route="POST /api/helm/release/async"}`,
		s.executor.URL: `asynchelm_executor_actions_total{action="install",outcome="deployed"}`,
		s.notifier.URL: `asynchelm_notifier_events_sent_total{result="ack",type="dev.asynchelm.release.status.deployed"}`,
	} {
		if m := metrics(t, url); !strings.Contains(m, want) {
			t.Errorf("%s/metrics lacks %s", url, want)
		}
	}
}

func metrics(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func index(evs []cloudevents.Event, id string) int {
	for i, e := range evs {
		if e.ID() == id {
			return i
		}
	}
	return -1
}

// regexpLine reports whether a line of out has these fields in this order.
func regexpLine(out string, fields ...string) bool {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := line, true
		for _, f := range fields {
			i := strings.Index(rest, f)
			if i < 0 {
				ok = false
				break
			}
			rest = rest[i+len(f):]
		}
		if ok {
			return true
		}
	}
	return false
}

// ocHelmStart starts the plugin in the background; the returned function waits (at most
// 2 minutes) for it and gives its output and exit code.
func (s *stack) ocHelmStart(t *testing.T, args ...string) func() (string, int) {
	t.Helper()
	return s.ocHelmStartFor(t, 2*time.Minute, args...)
}

// ocHelmStartFor is ocHelmStart waiting at most d.
func (s *stack) ocHelmStartFor(t *testing.T, d time.Duration, args ...string) func() (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	cmd := exec.CommandContext(ctx, bins["oc-helm"], append([]string{"--server", s.submit.URL, "--kubeconfig", cluster.Kubeconfig, "--token", cluster.Operator.BearerToken}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(cancel)
	return func() (string, int) {
		t.Helper()
		err := cmd.Wait()
		cancel()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("oc-helm %v: %v", args, err)
		}
		return out.String(), code
	}
}

// helmCLI runs Helm's own CLI (the version the product builds on) against the cluster as
// its admin, with a HOME of its own.
func helmCLI(t *testing.T, ns string, args ...string) (string, int) {
	t.Helper()
	helm, err := testcluster.HelmCLI()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, helm, append([]string{"--kubeconfig", cluster.Kubeconfig, "-n", ns}, args...)...)
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("helm %v: %v", args, err)
	}
	return string(out), code
}

// ocHelmPty starts the plugin on a pseudo-terminal cols wide, as a user's shell runs it;
// the returned function waits (at most 2 minutes) and gives what the terminal received
// (\r\n as the terminal sends it, turned back to \n) and the exit code.
func (s *stack) ocHelmPty(t *testing.T, cols uint16, args ...string) func() (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, bins["oc-helm"], append([]string{"--server", s.submit.URL, "--kubeconfig", cluster.Kubeconfig, "--token", cluster.Operator.BearerToken}, args...)...)
	ptmx, err := pty.StartWithSize(cmd, &pty.Winsize{Rows: 24, Cols: cols})
	if err != nil {
		t.Fatalf("oc-helm on a pseudo-terminal: %v", err)
	}
	t.Cleanup(func() { _ = ptmx.Close() })
	read := make(chan string, 1)
	go func() {
		var b bytes.Buffer
		_, _ = io.Copy(&b, ptmx) // ends with EIO once the process and its terminal are gone
		read <- strings.ReplaceAll(b.String(), "\r\n", "\n")
	}()
	return func() (string, int) {
		t.Helper()
		err := cmd.Wait()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatalf("oc-helm %v: %v", args, err)
		}
		select {
		case out := <-read:
			return out, code
		case <-time.After(10 * time.Second):
			t.Fatal("the terminal's output never ended")
			return "", code
		}
	}
}
