package localstack

import (
	"context"
	"slices"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

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

// A stopped stack leaves no election Lease in async-helm's namespace (the notifiers' own,
// ASYNC_HELM_NAMESPACE as their environment says), and another stack's stays.
func TestStopDeletesTheElectionLease(t *testing.T) {
	cfg := Config{Namespace: "ns1", FunctionEnv: map[string][]string{Notifier: {"ASYNC_HELM_NAMESPACE=own"}}}
	if got := cfg.ownNamespace(); got != "own" {
		t.Errorf("own namespace %q", got)
	}
	if got := (Config{Namespace: "ns1"}).ownNamespace(); got != "async-helm" {
		t.Errorf("default own namespace %q", got)
	}
	c := fake.NewClientset()
	leases := c.CoordinationV1().Leases("own")
	for _, name := range []string{NotifierLease("ns1"), NotifierLease("ns2")} {
		if _, err := leases.Create(context.Background(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	s := &Stack{NotifierLease: NotifierLease("ns1"), leases: leases}
	s.Stop()
	left, err := leases.List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left.Items) != 1 || left.Items[0].Name != NotifierLease("ns2") {
		t.Errorf("Leases left after Stop: %v", left.Items)
	}
	s.Stop() // a second Stop: nothing left to delete, no complaint
}
