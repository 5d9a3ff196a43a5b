package localstack

import (
	"slices"
	"strings"
	"testing"

	"github.com/async-helm/async-helm/internal/eventing"
)

func TestInstanceEnvironment(t *testing.T) {
	cfg := Config{Namespace: "ns1", Env: []string{"KUBECONFIG=k", "LOG_LEVEL=warn"},
		FunctionEnv: map[string][]string{Notifier: {"NAMESPACES=ns1", "LOG_LEVEL=info"}},
		InstanceEnv: func(fn string, i int) []string { return []string{"CPU_PROFILE=/tmp/" + InstanceName(fn, i)} }}
	got := cfg.env(Notifier, 1, "http://broker")
	want := []string{"KUBECONFIG=k", "LOG_LEVEL=warn", "K_SINK=http://broker", "LEADER_ELECTION_NAME=async-helm-notifier-ns1",
		"POD_NAME=notifier-1", "HOSTNAME=notifier-1", "NAMESPACES=ns1", "LOG_LEVEL=info", "CPU_PROFILE=/tmp/notifier-1"}
	if !slices.Equal(got, want) {
		t.Errorf("notifier-1's environment\n got %q\nwant %q", got, want)
	}
	got = cfg.env(Executor, 0, "http://broker")
	want = []string{"KUBECONFIG=k", "LOG_LEVEL=warn", "POD_NAME=executor-0", "HOSTNAME=executor-0", "CPU_PROFILE=/tmp/executor-0"}
	if !slices.Equal(got, want) {
		t.Errorf("executor-0's environment (no K_SINK: it sends nothing)\n got %q\nwant %q", got, want)
	}
	if got := cfg.env(Submit, 0, "http://broker"); !slices.Contains(got, "K_SINK=http://broker") {
		t.Errorf("submit's environment has no K_SINK: %q", got)
	}
}

func TestCountsDefaultToOne(t *testing.T) {
	c := Counts{Executor: 3}
	if c.of(Executor) != 3 || c.of(Submit) != 1 || c.of(Notifier) != 1 {
		t.Errorf("counts %+v: executor %d, submit %d, notifier %d", c, c.of(Executor), c.of(Submit), c.of(Notifier))
	}
}

// A stack that fails to start stops what it started and says why (seen: a nil Stack's
// Stop panicked and hid the error).
func TestFailedStartSaysWhy(t *testing.T) {
	_, err := Start(t.Context(), Config{Namespace: "ns1", Ports: eventing.Functions{Executor: -1}})
	if err == nil || !strings.Contains(err.Error(), "executor") {
		t.Errorf("Start with an impossible port: %v", err)
	}
}
