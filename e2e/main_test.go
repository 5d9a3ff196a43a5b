// Package e2e runs the built binaries (submit, executor, notifier, oc-helm) as processes
// against the local cluster, wired as on Knative: submit -> broker -> executor, notifier -> sink.
package e2e

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/async-helm/async-helm/internal/localbroker"
	"github.com/async-helm/async-helm/internal/proc"
	"github.com/async-helm/async-helm/internal/testcharts"
	"github.com/async-helm/async-helm/internal/testcluster"
	"github.com/async-helm/async-helm/internal/testsink"
	"github.com/async-helm/async-helm/internal/teststack"
	"github.com/async-helm/async-helm/pkg/submitclient"
)

var (
	cluster *testcluster.Env
	bins    map[string]string
)

func TestMain(m *testing.M) {
	cluster = testcluster.MustStart()
	dir, err := os.MkdirTemp("", "async-helm-e2e")
	if err != nil {
		panic(err)
	}
	if bins, err = teststack.Binaries(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// stack is the product running as processes.
type stack struct {
	submit, executor, notifier *proc.Process
	charts                     *testcharts.Server
	sink                       *testsink.Sink
	client                     *submitclient.Client
}

func newStack(t *testing.T, namespaces ...string) *stack {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s := &stack{charts: testcharts.Start(t), sink: testsink.Start(t)}
	common := map[string]string{"KUBECONFIG": cluster.Kubeconfig, "CHART_REPOSITORIES": "test=" + s.charts.URL, "LOG_LEVEL": "info",
		"ALLOW_LOOPBACK_CHARTS": "true", "EVENT_SIGNING_KEY": "e2e-signing-key-0123456789abcdef0123"}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range common {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	s.executor = teststack.Run(t, bins["executor"], with(nil))
	broker, err := localbroker.New(ctx, s.executor.URL)
	if err != nil {
		t.Fatal(err)
	}
	b := httptest.NewServer(broker)
	t.Cleanup(b.Close)
	s.submit = teststack.Run(t, bins["submit"], with(map[string]string{"K_SINK": b.URL}))
	s.notifier = teststack.Run(t, bins["notifier"], with(map[string]string{"K_SINK": s.sink.URL, "NAMESPACES": strings.Join(namespaces, ",")}))
	s.client = &submitclient.Client{Server: s.submit.URL, Token: cluster.Operator.BearerToken}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("submit log:\n%s\nexecutor log:\n%s\nnotifier log:\n%s", tail(s.submit.Output()), tail(s.executor.Output()), tail(s.notifier.Output()))
		}
	})
	return s
}

func tail(s string) string {
	lines := strings.Split(s, "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}

// ocHelm runs the built plugin and returns its output and exit code.
func (s *stack) ocHelm(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(bins["oc-helm"], append([]string{"--server", s.submit.URL, "--kubeconfig", cluster.Kubeconfig, "--token", cluster.Operator.BearerToken}, args...)...)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return string(out), code
}
