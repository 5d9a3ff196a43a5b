package e2e

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/async-helm/async-helm/pkg/api"
)

// Every command of the unmodified oc-helm plugin against submit, as it talks to the
// console's helm backend (session cookie, CSRF double submit, https): the synchronous and
// the asynchronous routes, the read side, the chart index, verify and the errors it prints.
// It needs OC_HELM_UPSTREAM_SRC (upstreamOcHelm); without it, it is skipped.
func TestUpstreamOcHelmCommands(t *testing.T) {
	t.Parallel()
	bin := upstreamOcHelm(t)
	ns := cluster.Namespace(t)
	s := newStack(t, ns)
	front := startConsoleFront(t, s)
	run := upstreamRunner(t, front.host, ns, bin)
	must := func(want string, args ...string) string {
		t.Helper()
		out, code := run(args...)
		if code != 0 || !strings.Contains(out, want) {
			t.Fatalf("oc-helm %s: exit %d, want %q in\n%s", strings.Join(args, " "), code, want, out)
		}
		return out
	}
	must("test\t\ttiny\t\t0.1.0", "index")
	must("name: tiny", "show", "chart", "test/tiny")
	must("message: hello", "show", "values", "test/tiny")

	// Asynchronous: the answer is the release Secret at once; the work goes on behind it.
	must("NAME: sh.helm.release.v1.web.v1", "install-async", "web", "test/tiny", "--set", "message=one")
	waitStatus(t, s, ns, "web", "deployed", time.Minute)
	must("NAME: sh.helm.release.v1.web.v2", "upgrade-async", "web", "test/tiny", "--set", "message=two")
	// upgrade --install of a new name installs it (its read must fail with Helm's "release: not found").
	must(`Release "web2" does not exist. Installing it now.`, "upgrade-async", "--install", "web2", "test/tiny")
	waitStatus(t, s, ns, "web", "deployed", time.Minute)
	waitStatus(t, s, ns, "web2", "deployed", time.Minute)
	if rel, err := s.client.Get(context.Background(), ns, "web"); err != nil || rel.Version != 2 || rel.Config["message"] != "two" {
		t.Fatalf("web after upgrade-async: %+v %v, want revision 2 with message=two", rel, err)
	}

	// Synchronous: the console's routes answer with the final release.
	out := must("STATUS: deployed", "install", "db", "test/tiny")
	if !strings.Contains(out, "REVISION: 1") {
		t.Errorf("install db: want revision 1:\n%s", out)
	}
	must("Installing it now", "upgrade", "-i", "db2", "test/tiny")
	must("REVISION: 2", "upgrade", "db", "test/tiny", "--set", "replicas=2")
	must("Rollback was a success", "rollback", "db")
	out = must("Rollback to 1", "history", "db")
	if !regexp.MustCompile(`(?m)^1\s.*superseded`).MatchString(out) || !regexp.MustCompile(`(?m)^3\s.*deployed`).MatchString(out) {
		t.Errorf("history db: want revision 1 superseded and 3 deployed:\n%s", out)
	}
	out = must("NAME", "list")
	for _, name := range []string{"web", "web2", "db", "db2"} {
		if !regexp.MustCompile(`(?m)^` + name + `\s+` + ns + `\s.*deployed\s+tiny-0.1.0`).MatchString(out) {
			t.Errorf("list: want %s deployed:\n%s", name, out)
		}
	}

	// Uninstall, both ways; then the release is gone from every read.
	must("STATUS CODE: 204", "uninstall-async", "web", "2")
	for _, name := range []string{"db", "db2", "web2"} {
		must(`release "`+name+`" uninstalled`, "uninstall", name)
	}
	waitGone(t, s, ns, "web", time.Minute)
	out = must("NAME", "list")
	if strings.Contains(out, "web") || strings.Contains(out, "db") {
		t.Errorf("list after uninstall:\n%s", out)
	}

	// Errors reach the user as the console words them, with a failing exit.
	for _, args := range [][]string{{"history", "nothere"}, {"rollback", "nothere"}, {"uninstall", "nothere"}} {
		if out, code := run(args...); code == 0 || !strings.Contains(out, "release: not found") {
			t.Errorf("oc-helm %s: exit %d\n%s", strings.Join(args, " "), code, out)
		}
	}
	if out, code := run("install-async", "Bad_Name", "test/tiny"); code == 0 || !strings.Contains(strings.ToLower(out), "name") {
		t.Errorf("install-async of an invalid name: exit %d\n%s", code, out)
	}
	// A chart that cannot render: the synchronous install fails with Helm's reason, and the
	// release is listed failed.
	if out, code := run("install", "broken", "test/badtemplate"); code == 0 || !strings.Contains(out, "value is required") {
		t.Errorf("install of a chart that cannot render: exit %d\n%s", code, out)
	}
	if out := must("NAME", "list"); !regexp.MustCompile(`(?m)^broken\s.*failed`).MatchString(out) {
		t.Errorf("list: want broken failed:\n%s", out)
	}

	// verify posts {chart_url, values} to /api/helm/verify and prints the answer's error
	// (this build has no chart-verifier: 501).
	out, code := run("verify", "--chart-url", s.charts.ChartURL("tiny", "0.1.0"), "--values", "provider=developer-console")
	if code != 1 || !strings.Contains(out, "chart verification is not available: async-helm is built without Red Hat's chart-verifier") {
		t.Errorf("verify: exit %d\n%s", code, out)
	}
	out, code = run("verify", "--chart-url", s.charts.URL+"/index.yaml")
	if code != 1 || strings.TrimSpace(out) != api.VerifyInvalidURL {
		t.Errorf("verify of a URL the console refuses: exit %d\n%s", code, out)
	}
	// What it sent is what TestUpstreamOcHelmWire replays in every make test.
	if os.Getenv(upstreamRecordEnv) != "" {
		front.record(t)
		return
	}
	front.matchesFile(t, false)
}

// upstreamRecordEnv set makes the live test rewrite wireFile from what the plugin sent.
const upstreamRecordEnv = "OC_HELM_UPSTREAM_RECORD"

// upstreamSrcEnv names a directory holding the unmodified oc-helm's source
// (github.com/redhat-developer/oc-helm, module github.com/redhat-cop/oc-helm), built with
// its own go.mod. The Go module proxy does not serve that module, and this repository keeps
// no copy of another project's source: CONTRIBUTING.md says how to get a checkout.
const upstreamSrcEnv = "OC_HELM_UPSTREAM_SRC"

// upstreamOcHelm builds the unmodified oc-helm from the checkout upstreamSrcEnv names, or
// skips the test when it is not set (a skip, not a pass).
func upstreamOcHelm(t *testing.T) string {
	t.Helper()
	src := os.Getenv(upstreamSrcEnv)
	if src == "" {
		t.Skipf("%s is not set: it names a checkout of the unmodified oc-helm (github.com/redhat-developer/oc-helm) "+
			"to build and run against submit (CONTRIBUTING.md); without it this test does not run", upstreamSrcEnv)
	}
	if _, err := os.Stat(filepath.Join(src, "go.mod")); err != nil {
		t.Fatalf("%s=%s: not a Go module checkout of oc-helm: %v", upstreamSrcEnv, src, err)
	}
	bin := filepath.Join(t.TempDir(), "oc-helm-upstream")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build the unmodified oc-helm in %s: %v\n%s", src, err, out)
	}
	return bin
}

// upstreamRunner runs the oc-helm binary bin against submit behind the console front host, in ns.
func upstreamRunner(t *testing.T, host, ns, bin string) func(args ...string) (string, int) {
	t.Helper()
	return func(args ...string) (string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append(args, "--console-hostname", host, "--token", cluster.Operator.BearerToken,
			"--apiserver", "https://unused.invalid", "-n", ns)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		t.Logf("oc-helm %s: exit %d\n%s", strings.Join(args, " "), code, out.String())
		return out.String(), code
	}
}
