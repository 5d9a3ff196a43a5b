package e2e

import (
	"bufio"
	"context"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/events"
)

// The action's log on the local cluster: an install whose Deployment never gets ready
// (kwok's simulate: stuck) with Helm's wait and a 20 s timeout. While it runs its log is
// served (running) and `oc helm logs -f` follows it to its end; afterwards `oc helm logs`
// prints it (golden, volatile parts normalised), a caller who may not read the release gets
// 403, a release without a log 404, and the failed status event carries the log's tail.
// Values never appear in it.
func TestActionLogOfAFailedInstall(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	s := newStack(t, ns)
	install := s.ocHelmStart(t, "-n", ns, "install", "stuck", s.charts.ChartURL("tiny", "0.1.0"),
		"--set", `podAnnotations.async-helm\.io/simulate=stuck`, "--set", "password=hunter2-e2e", "--timeout", "20s", "--wait")

	// While Helm waits, the log is there and says so.
	var live api.ActionLog
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		live = api.ActionLog{}
		code := s.callAPI(t, "GET", api.PathLog, ns, "stuck", &live)
		if code == 200 && live.Running && hasLine(live.Lines, "beginning wait for") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no running log with Helm's wait: %d %+v", code, live)
		}
	}
	follow := s.ocHelmStart(t, "-n", ns, "logs", "stuck", "-f")
	// A second follower whose output is read as it comes: Helm's wait is printed while the
	// revision is still pending.
	early := s.followEarly(t, ns, "stuck", "Deployment is not ready: "+ns+"/stuck")
	if st := s.getRelease(t, ns, "stuck").Info.Status.String(); st != "pending-install" {
		t.Errorf("logs -f printed the wait only once the revision was %s", st)
	}
	t.Logf("logs -f, while pending:\n%s", early)

	out, code := install()
	if code != 1 || !strings.Contains(out, "failed") {
		t.Fatalf("install --wait: exit %d\n%s", code, out)
	}
	followed, code := follow()
	if code != 0 || !strings.Contains(followed, "beginning wait for") || !strings.Contains(followed, "Error: timed out after 20s") {
		t.Fatalf("logs -f (started while the action ran): exit %d\n%s", code, followed)
	}
	t.Logf("logs -f:\n%s", followed)

	plain, code := s.ocHelm(t, "-n", ns, "logs", "stuck")
	if code != 0 {
		t.Fatalf("logs: exit %d\n%s", code, plain)
	}
	if strings.Contains(plain, "hunter2-e2e") {
		t.Errorf("a value in the log:\n%s", plain)
	}
	golden(t, "actionlog-stuck", normaliseLog(plain, ns))

	// Another revision: none. A caller who may not read the namespace: 403, log or not.
	if out, code := s.ocHelm(t, "-n", ns, "logs", "stuck", "--revision", "2"); code != 1 || !strings.Contains(out, "HTTP 404") {
		t.Errorf("logs --revision 2: exit %d\n%s", code, out)
	}
	if out, code := s.ocHelm(t, "-n", ns, "logs", "ghost"); code != 1 || !strings.Contains(out, "HTTP 404") {
		t.Errorf("logs of no release: exit %d\n%s", code, out)
	}
	if cluster.Dev.BearerToken != "" {
		for _, name := range []string{"stuck", "ghost"} {
			out, code := s.ocHelm(t, "-n", ns, "logs", name, "--token", cluster.Dev.BearerToken)
			if code != 1 || !strings.Contains(out, "HTTP 403") {
				t.Errorf("dev reads the log of %s in %s: exit %d\n%s", name, ns, code, out)
			}
		}
	}

	// The failed status event carries the tail.
	evs := s.sink.WaitFor(t, 30*time.Second, "a failed status event with the log's tail", func(evs []cloudevents.Event) bool {
		return failedTail(evs, "stuck") != ""
	})
	tail := failedTail(evs, "stuck")
	if !strings.Contains(tail, "Deployment is not ready: "+ns+"/stuck") || !strings.Contains(tail, "Error: ") {
		t.Errorf("tail of the failed event:\n%s", tail)
	}
	t.Logf("failed event's logTail:\n%s", tail)
}

// A namespace deleted and made again under its name (a new UID): the previous owner's
// release log is not served there, to the operator or to dev granted the new namespace;
// the new namespace's own log of the same release and revision is.
func TestActionLogOfARemadeNamespace(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	s := newStack(t, ns)
	chart := s.charts.ChartURL("tiny", "0.1.0")
	if out, code := s.ocHelm(t, "-n", ns, "install", "web", chart, "--wait"); code != 0 {
		t.Fatalf("install: exit %d\n%s", code, out)
	}
	if out, code := s.ocHelm(t, "-n", ns, "logs", "web"); code != 0 {
		t.Fatalf("the owner's log: exit %d\n%s", code, out)
	}
	remakeNamespace(t, ns)
	grantDev(t, ns, "edit")
	for _, args := range [][]string{{"logs", "web"}, {"logs", "web", "--revision", "1"},
		{"logs", "web", "--token", cluster.Dev.BearerToken}} {
		if args[len(args)-1] == "" {
			t.Fatal("dev has no token in the local cluster's kubeconfig")
		}
		if out, code := s.ocHelm(t, append([]string{"-n", ns}, args...)...); code != 1 || !strings.Contains(out, "HTTP 404") {
			t.Errorf("%v in the re-made namespace: exit %d, want 404\n%s", args, code, out)
		}
	}
	if out, code := s.ocHelm(t, "-n", ns, "install", "web", chart, "--wait"); code != 0 {
		t.Fatalf("install in the re-made namespace: exit %d\n%s", code, out)
	}
	if out, code := s.ocHelm(t, "-n", ns, "logs", "web", "--token", cluster.Dev.BearerToken); code != 0 {
		t.Errorf("the re-made namespace's own log, read by dev: exit %d\n%s", code, out)
	}
}

// remakeNamespace deletes namespace ns, waits until it is gone, and makes it again.
func remakeNamespace(t *testing.T, ns string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	nss := cluster.Client.CoreV1().Namespaces()
	old, err := nss.Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := nss.Delete(ctx, ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, err = nss.Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err); _, err = nss.Get(ctx, ns, metav1.GetOptions{}) {
		if ctx.Err() != nil {
			t.Fatalf("namespace %s not deleted: %v", ns, err)
		}
		time.Sleep(time.Second)
	}
	made, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: old.Labels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if made.UID == old.UID {
		t.Fatalf("namespace %s made again under its UID %s", ns, old.UID)
	}
}

// followEarly runs oc helm logs -f and returns its output as soon as a line contains want.
func (s *stack) followEarly(t *testing.T, ns, name, want string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, bins["oc-helm"], "--server", s.submit.URL, "--kubeconfig", cluster.Kubeconfig,
		"--token", cluster.Operator.BearerToken, "-n", ns, "logs", name, "-f")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); _ = cmd.Wait() })
	var seen strings.Builder
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		seen.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), want) {
			return seen.String()
		}
	}
	t.Fatalf("logs -f ended without %q:\n%s", want, seen.String())
	return ""
}

func hasLine(lines []api.LogLine, prefix string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l.Text, prefix) {
			return true
		}
	}
	return false
}

func failedTail(evs []cloudevents.Event, name string) string {
	for _, e := range evs {
		var c events.StatusChange
		if e.Type() == events.TypeStatusPrefix+"failed" && e.DataAs(&c) == nil && c.Name == name {
			return c.LogTail
		}
	}
	return ""
}

var (
	logTime  = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ`)
	logTimes = regexp.MustCompile(`\(\d+ times, the last at TIME\)`)
	logHash  = regexp.MustCompile(`stuck-[a-z0-9]{6,10}\b`)
)

// normaliseLog replaces what changes from run to run: times, the namespace, counts of
// repeats, the ReplicaSet's hash; and folds what then repeats (Helm's wait alternates
// between its resources).
func normaliseLog(out, ns string) string {
	out = strings.ReplaceAll(out, ns, "NS")
	out = logTime.ReplaceAllString(out, "TIME")
	out = logTimes.ReplaceAllString(out, "(N times)")
	out = logHash.ReplaceAllString(out, "stuck-HASH")
	var kept []string
	seen := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, "ReplicaSet is not ready") || strings.Contains(l, "does not match spec generation") {
			continue // only when Helm looks before the controller did: timing
		}
		if strings.Contains(l, "is not ready") || strings.Contains(l, "(N times)") {
			l = strings.Replace(l, " (N times)", "", 1)
			if seen[l] {
				continue
			}
			seen[l] = true
		}
		kept = append(kept, l)
	}
	return strings.Join(kept, "\n")
}
