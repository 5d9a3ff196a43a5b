// Package e2e runs the built binaries (submit, executor, notifier, oc-helm) as processes
// against the local cluster, wired through the local Knative Eventing (tools/knative) with
// config/knative's Broker and Triggers: submit -> Broker -> executor, notifier -> Broker ->
// a Trigger -> the test's sink.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/async-helm/async-helm/internal/eventing"
	"github.com/async-helm/async-helm/internal/localstack"
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
	local   *eventing.Local
	root    string
)

func TestMain(m *testing.M) {
	// GitLab's story and the supersede and progress tests wait on slow pods for minutes.
	if err := testcluster.WaitBoundParallel(3); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	cluster = testcluster.MustStart()
	var err error
	if err = ensureOwnNamespace(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if root, err = testcluster.RepoRoot(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if local, err = eventing.Open(eventing.Dir(root), cluster.Kubeconfig); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
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

// stack is the product running as processes: submit, executor and notifier are the first
// instance of each (the only one unless stackEnv.Counts asks for more); client calls submit
// through its load balancer, as Knative's Triggers reach the others (internal/localstack).
type stack struct {
	submit, executor, notifier *proc.Process
	charts                     *testcharts.Server
	sink                       *testsink.Sink
	client                     *submitclient.Client
	ports                      eventing.Functions
	all                        *localstack.Stack
}

// wire applies config/knative's Broker and Triggers to a namespace of the test, with the
// notifier's status events delivered to eventLog, for functions on the returned ports.
func wire(t *testing.T, eventLog string, delivery ...map[string]map[string]any) (eventing.Functions, *eventing.Wiring) {
	t.Helper()
	ports, err := eventing.FreeFunctions()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o := eventing.Options{Namespace: cluster.Namespace(t),
		ConfigDir: filepath.Join(root, "config", "knative"), Addresses: ports.Addresses(), EventLog: eventLog}
	if len(delivery) > 0 {
		o.Delivery = delivery[0]
	}
	w, err := local.Wire(ctx, cluster.Admin, o)
	if err != nil {
		t.Fatal(err)
	}
	return ports, w
}

// newStack starts submit, executor and notifier wired through Knative. namespaces are the
// notifier's NAMESPACES: give the test's own. Without them it watches and sweeps every
// namespace, so it fails another parallel test's records signed with another key ("its
// stored request is not submit's").
func newStack(t *testing.T, namespaces ...string) *stack {
	t.Helper()
	return newStackWith(t, nil, namespaces...)
}

// newStackWith is newStack with extra environment for submit.
func newStackWith(t *testing.T, submitEnv map[string]string, namespaces ...string) *stack {
	t.Helper()
	return newStackEnv(t, stackEnv{Submit: submitEnv}, namespaces...)
}

// stackEnv is extra environment for each function of a stack, and how many instances of
// each run (zero: one).
type stackEnv struct {
	Submit, Executor, Notifier map[string]string
	Counts                     localstack.Counts
}

// newStackEnv is newStack with extra environment per function.
func newStackEnv(t *testing.T, env stackEnv, namespaces ...string) *stack {
	t.Helper()
	s := &stack{charts: testcharts.Start(t), sink: testsink.Start(t)}
	common := map[string]string{"KUBECONFIG": cluster.Kubeconfig, "CHART_REPOSITORIES": "test=" + s.charts.URL, "LOG_LEVEL": "info",
		"ALLOW_LOOPBACK_CHARTS": "true", "EVENT_SIGNING_KEY": "e2e-signing-key-0123456789abcdef0123"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	st, err := localstack.Start(ctx, localstack.Config{Knative: local, Rest: cluster.Admin, Namespace: cluster.Namespace(t),
		ConfigDir: filepath.Join(root, "config", "knative"), EventLog: s.sink.URL, Bins: bins, Counts: env.Counts, LogDir: t.TempDir(),
		Env: envList(common), FunctionEnv: map[string][]string{localstack.Executor: envList(env.Executor),
			localstack.Submit:   envList(env.Submit),
			localstack.Notifier: append([]string{"NAMESPACES=" + strings.Join(namespaces, ",")}, envList(env.Notifier)...)}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Stop)
	s.all, s.ports = st, st.Ports()
	s.submit, s.executor, s.notifier = st.Submit.Instances[0], st.Executor.Instances[0], st.Notifier.Instances[0]
	s.client = &submitclient.Client{Server: st.Submit.URL, Token: cluster.Operator.BearerToken}
	t.Cleanup(func() {
		if t.Failed() {
			for _, f := range st.Functions() {
				for i, p := range f.Instances {
					t.Logf("%s log:\n%s", localstack.InstanceName(f.Name, i), tail(p.Output()))
				}
			}
		}
	})
	return s
}

// envList is env as KEY=value, in key order.
func envList(env map[string]string) []string {
	out := make([]string, 0, len(env))
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
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
