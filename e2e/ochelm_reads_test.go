package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"

	"github.com/async-helm/async-helm/internal/testcluster"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// oc helm's read side prints what helm v3.21's CLI prints on the same records, byte for
// byte: releases written by helm v3 (a chart with notes, hooks and a test hook), by helm v4
// and by async-helm (deployed, upgraded, failed). The one documented difference, list
// without a status flag, is compared with helm's -a.
func TestOcHelmReadsAsHelms(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	// This test reads; admission is not its subject: work other runs left queued in the
	// shared cluster must not refuse its three installs.
	s := newStackWith(t, unbounded, ns)
	tiny := s.charts.ChartURL("tiny", "0.1.0")
	chart := writeShownChart(t)

	mustRun(t, "helm", helmV3(t), ns, "install", "shown", chart, "--set", "message=one")
	mustRun(t, "helm", helmV3(t), ns, "upgrade", "shown", chart, "--set", "message=two", "--description", "second")
	mustRun(t, "helm v4", helmV4(t), ns, "install", "four", chart, "--set", "nested.a=4")
	for _, args := range [][]string{
		{"install", "web", tiny, "--set", "message=one", "--wait"},
		{"upgrade", "web", tiny, "--set", "message=two", "--wait"},
	} {
		if out, code := s.ocHelm(t, append([]string{"-n", ns}, args...)...); code != 0 {
			t.Fatalf("oc helm %v: exit %d\n%s", args, code, out)
		}
	}
	if out, code := s.ocHelm(t, "-n", ns, "install", "bad", s.charts.ChartURL("hookfail", "0.1.0"), "--wait"); code == 0 {
		t.Fatalf("the failing install exited 0:\n%s", out)
	}

	same := [][]string{
		{"list", "-a"}, {"list", "--deployed"}, {"list", "--failed"}, {"list", "-a", "-q"}, {"list", "-a", "-o", "json"},
		{"list", "-a", "-o", "yaml"}, {"list", "-a", "-q", "-o", "yaml"}, {"list", "-a", "--filter", "^(web|shown)$"},
		{"list", "-a", "-d"}, {"list", "-a", "-d", "-r"}, {"list", "-a", "-m", "2", "--offset", "1"}, {"list", "-a", "--no-headers"},
		{"list", "-a", "--time-format", "2006-01-02T15:04"},
		{"status", "bad", "--show-desc"}, {"status", "bad", "-o", "json"}, {"history", "bad"}, {"get", "all", "bad"},
		{"template", "web", tiny, "--set", "message=rendered"}, {"template", tiny},
	}
	for _, name := range []string{"shown", "four", "web"} {
		same = append(same, [][]string{
			{"status", name, "--show-desc"}, {"status", name, "-o", "json"}, {"status", name, "-o", "yaml"},
			{"history", name}, {"history", name, "--max", "1"}, {"history", name, "-o", "json"}, {"history", name, "-o", "yaml"},
			{"get", "values", name}, {"get", "values", name, "-a"}, {"get", "values", name, "-o", "json"}, {"get", "values", name, "-a", "-o", "yaml"},
			{"get", "manifest", name}, {"get", "hooks", name}, {"get", "notes", name}, {"get", "all", name},
			{"get", "all", name, "--template", "{{.Release.Name}} {{.Release.Version}} {{.Release.Info.Status}}"},
		}...)
		if name != "four" {
			same = append(same, [][]string{{"status", name, "--revision", "1", "--show-desc"}, {"get", "values", name, "--revision", "1"},
				{"get", "manifest", name, "--revision", "1"}}...)
		}
	}
	for _, args := range same {
		ours, ourErr, ourCode := runCLI(t, bins["oc-helm"], s.ocHelmFlags(ns), args)
		theirs, theirErr, theirCode := runCLI(t, helmV3(t), []string{"--kubeconfig", cluster.Kubeconfig, "-n", ns}, args)
		if ourCode != 0 || theirCode != 0 || ours != theirs {
			t.Errorf("%v: oc helm (exit %d) and helm (exit %d) differ\n--- oc helm\n%s%s--- helm\n%s%s", args, ourCode, theirCode, ours, ourErr, theirs, theirErr)
		}
	}
	// `list` without a status flag is helm's -a.
	if ours, _, _ := runCLI(t, bins["oc-helm"], s.ocHelmFlags(ns), []string{"list"}); ours != mustRun(t, "helm", helmV3(t), ns, "list", "-a") {
		t.Errorf("oc helm list is not helm list -a:\n%s", ours)
	}
	checkErrorsAsHelms(t, s, ns)
}

// Full lists (no limitInfo) of records written by hand, 20 KiB Secrets whose manifests are
// 15 MiB, 4 at once: each read slot keeps at most its share of records, so each is refused
// 413 and submit, under its GOMEMLIMIT, stays within its Knative limit. One such record
// still reads whole, in a list and a get.
func TestFullListsOfLargeRecordsKeepSubmitWithinItsLimit(t *testing.T) {
	t.Parallel()
	ns, one := cluster.Namespace(t), cluster.Namespace(t)
	limits := knativeMemory(t)
	s := newStackWith(t, map[string]string{"GOMEMLIMIT": limits["submit"].gomemlimit}, ns, one)
	manifest := strings.Repeat("m", 15<<20)
	for i := range 4 {
		largeRecord(t, ns, fmt.Sprintf("big-%d", i), manifest)
	}
	largeRecord(t, one, "big-0", manifest)
	codes := make(chan string, 4)
	for range 4 {
		go func() { codes <- operatorGet(s, api.PathList, url.Values{"ns": {ns}}) }()
	}
	for range 4 {
		if got := <-codes; !strings.HasPrefix(got, "413 ") {
			t.Errorf("a full list of 4 records of 15 MiB manifests: %s, want 413", got)
		}
	}
	for _, q := range []url.Values{{"ns": {one}}, {"ns": {ns}, "name": {"big-0"}}, {"ns": {ns}, "limitInfo": {"true"}}} {
		path := api.PathList
		if q.Has("name") {
			path = api.PathRelease
		}
		if got := operatorGet(s, path, q); !strings.HasPrefix(got, "200 ") {
			t.Errorf("%s?%s: %s, want 200", path, q.Encode(), got)
		}
	}
	checkPeakRSS(t, "submit", s.submit.Pid(), limits["submit"].limit)
}

// largeRecord writes revision 1 of release name into ns as Helm would, with manifest.
func largeRecord(t *testing.T, ns, name, manifest string) {
	t.Helper()
	now := helmtime.Now()
	r := &helmrelease.Release{Name: name, Namespace: ns, Version: 1, Manifest: manifest,
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "0.1.0", APIVersion: "v2"}},
		Info:  &helmrelease.Info{FirstDeployed: now, LastDeployed: now, Status: helmrelease.StatusDeployed}}
	if err := storage.NewSecrets(cluster.Client.CoreV1().Secrets(ns)).Create(release.SecretName(name, 1), r); err != nil {
		t.Fatal(err)
	}
}

// operatorGet reads path?q from submit as the operator: the status and the answer's size,
// or the error.
func operatorGet(s *stack, path string, q url.Values) string {
	req, err := http.NewRequest(http.MethodGet, s.submit.URL+path+"?"+q.Encode(), nil)
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Authorization", "Bearer "+cluster.Operator.BearerToken)
	resp, err := (&http.Client{Timeout: 2 * time.Minute}).Do(req)
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	n, err := io.Copy(io.Discard, resp.Body)
	return fmt.Sprintf("%d (%d bytes, %v)", resp.StatusCode, n, err)
}

// checkErrorsAsHelms: bad input is refused with helm's message (the command path aside)
// and exit 1; a missing release or revision starts with helm's "release: not found".
func checkErrorsAsHelms(t *testing.T, s *stack, ns string) {
	for _, tc := range []struct {
		args  []string
		exact bool
	}{
		{[]string{"status"}, true}, {[]string{"get", "values"}, true}, {[]string{"history", "web", "db"}, true},
		{[]string{"list", "web"}, true}, {[]string{"status", "web", "-o", "wide"}, true}, {[]string{"list", "--filter", "("}, true},
		{[]string{"list", "--bogus"}, true}, {[]string{"status", "web", "--revision", "x"}, true}, {[]string{"rollback", "web", "x"}, true},
		{[]string{"get", "values", "ghost"}, false}, {[]string{"get", "manifest", "web", "--revision", "9"}, false},
		{[]string{"status", "ghost"}, false}, {[]string{"history", "ghost"}, false},
	} {
		ours, ourErr, ourCode := runCLI(t, bins["oc-helm"], s.ocHelmFlags(ns), tc.args)
		_, theirErr, theirCode := runCLI(t, helmV3(t), []string{"--kubeconfig", cluster.Kubeconfig, "-n", ns}, tc.args)
		ourErr = strings.ReplaceAll(ourErr, "oc-helm", "helm")
		theirErr = helmError(theirErr)
		match := ourErr == theirErr
		if !tc.exact {
			match = strings.HasPrefix(ourErr, strings.TrimSuffix(theirErr, "\n"))
		}
		if ourCode != 1 || theirCode != 1 || ours != "" || !match {
			t.Errorf("%v: oc helm (exit %d) and helm (exit %d) differ\n--- oc helm\n%s%s--- helm\n%s", tc.args, ourCode, theirCode, ours, ourErr, theirErr)
		}
	}
}

// helmError is helm's stderr without its warnings about the kubeconfig's permissions.
func helmError(stderr string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(stderr, "\n") {
		if !strings.HasPrefix(line, "WARNING: ") {
			b.WriteString(line)
		}
	}
	return b.String()
}

// ocHelmFlags are the flags that point oc-helm at this stack's submit, in namespace ns.
func (s *stack) ocHelmFlags(ns string) []string {
	return []string{"--server", s.submit.URL, "--kubeconfig", cluster.Kubeconfig, "--token", cluster.Operator.BearerToken, "-n", ns}
}

// runCLI runs bin with flags then args and a HOME of its own; stdout, stderr, exit code.
func runCLI(t *testing.T, bin string, flags, args []string) (string, string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	home := t.TempDir()
	cmd := exec.CommandContext(ctx, bin, append(append([]string{}, flags...), args...)...)
	cmd.Env = append(os.Environ(), "HOME="+home, "HELM_CONFIG_HOME="+filepath.Join(home, "config"),
		"HELM_CACHE_HOME="+filepath.Join(home, "cache"), "HELM_DATA_HOME="+filepath.Join(home, "data"))
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("%s %v: %v", bin, args, err)
	}
	return out.String(), errOut.String(), code
}

// mustRun runs a helm CLI in ns and fails the test unless it exits 0; its stdout.
func mustRun(t *testing.T, what, bin, ns string, args ...string) string {
	t.Helper()
	out, errOut, code := runCLI(t, bin, []string{"--kubeconfig", cluster.Kubeconfig, "-n", ns}, args)
	if code != 0 {
		t.Fatalf("%s %v: exit %d\n%s%s", what, args, code, out, errOut)
	}
	return out
}

func helmV3(t *testing.T) string {
	t.Helper()
	bin, err := testcluster.HelmCLI()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

func helmV4(t *testing.T) string {
	t.Helper()
	bin, err := testcluster.HelmV4CLI()
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// writeShownChart writes a chart with everything get and status show: values with a
// nested map, notes, a post-install hook and a test hook that has not run.
func writeShownChart(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "shown")
	files := map[string]string{
		"Chart.yaml":  "apiVersion: v2\nname: shown\nversion: 0.2.0\nappVersion: \"2.0\"\n",
		"values.yaml": "message: hello\nnested:\n  a: 1\n  b: [x, y]\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cm\n" +
			"data:\n  message: {{ .Values.message | quote }}\n  a: {{ .Values.nested.a | quote }}\n",
		"templates/NOTES.txt": "Thank you for installing {{ .Chart.Name }}.\nThe message is {{ .Values.message }}.\n",
		"templates/hook.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-hook\n" +
			"  annotations:\n    helm.sh/hook: post-install,post-upgrade\n    helm.sh/hook-weight: \"1\"\ndata:\n  revision: {{ .Release.Revision | quote }}\n",
		"templates/tests/test.yaml": "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {{ .Release.Name }}-test\n" +
			"  annotations:\n    helm.sh/hook: test\nspec:\n  restartPolicy: Never\n  containers:\n  - name: t\n    image: busybox\n",
	}
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
