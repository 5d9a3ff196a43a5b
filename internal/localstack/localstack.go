// Package localstack starts the product as make run, the end-to-end tests, make chaos and
// make bench run it: config/knative's Broker and Triggers on the local Knative Eventing
// (internal/eventing), and N instances of each function as local processes (internal/proc)
// behind one load balancer per function (internal/loadbalance), whose address stands for the
// Knative Service's: the Triggers deliver to it, clients call it, and it spreads requests
// over the instances as Knative spreads them over a Service's pods.
package localstack

import (
	"context"
	"fmt"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/internal/eventing"
	"github.com/async-helm/async-helm/internal/loadbalance"
	"github.com/async-helm/async-helm/internal/proc"
)

// The functions, by their Knative Service names.
const (
	Submit   = "submit"
	Executor = "executor"
	Notifier = "notifier"
)

// Counts is how many instances of each function run; zero means one.
type Counts struct{ Submit, Executor, Notifier int }

func (c Counts) of(fn string) int {
	n := map[string]int{Submit: c.Submit, Executor: c.Executor, Notifier: c.Notifier}[fn]
	return max(n, 1)
}

// Config says what to start.
type Config struct {
	// Knative is the running local Knative Eventing (eventing.Open); Rest the admin's
	// config of its cluster.
	Knative *eventing.Local
	Rest    *rest.Config
	// Namespace receives the Broker and Triggers (it must exist); ConfigDir is config/knative.
	Namespace, ConfigDir string
	// EventLog, when set, gets the notifier's status events through a Trigger of its own.
	EventLog string
	// Delivery and WireTimeout are eventing.Options' Delivery and Timeout.
	Delivery    map[string]map[string]any
	WireTimeout time.Duration
	// Bins are the built functions by name (Bins(dir) for a directory of all three).
	Bins   map[string]string
	Counts Counts
	// Ports are the load balancers' ports (the Services' addresses); 0 picks a free one.
	Ports eventing.Functions
	// LogDir gets one log per instance: <function>-<i>.log (appended to).
	LogDir string
	// Env goes to every process, FunctionEnv[name] to that function's, then InstanceEnv's
	// answer to one instance. The stack itself sets, after Env and before the others:
	// K_SINK (the Broker) for submit and the notifier; LEADER_ELECTION_NAME
	// (NotifierLease) for the notifier; POD_NAME and HOSTNAME=<function>-<i> for every
	// instance (an executor's identity in the revisions' Leases, a notifier's in its leader
	// election, as a pod's name).
	Env         []string
	FunctionEnv map[string][]string
	InstanceEnv func(fn string, i int) []string
}

// Bins names the three functions built into dir (make build's bin/).
func Bins(dir string) map[string]string {
	return map[string]string{Submit: filepath.Join(dir, Submit), Executor: filepath.Join(dir, Executor), Notifier: filepath.Join(dir, Notifier)}
}

// Stack is one running stack.
type Stack struct {
	Wiring                     *eventing.Wiring
	Submit, Executor, Notifier *Function
	// NotifierLease names the Lease of this stack's notifiers' leader election, in their
	// ASYNC_HELM_NAMESPACE: one per stack, since stacks on one cluster share that namespace
	// but each watches its own (a cluster's notifiers all elect on one Lease).
	NotifierLease string
	// leases is the Lease client of the notifiers' own namespace: Stop deletes NotifierLease.
	leases typedcoordinationv1.LeaseInterface
}

// Function is one function's instances and the balancer in front of them.
type Function struct {
	Name string
	// URL is the balancer's: what Knative delivers to and clients call.
	URL       string
	Balancer  *loadbalance.Balancer
	Instances []*proc.Process
}

// Start opens the balancers, wires the namespace through Knative to them, then starts the
// executors, the notifiers and the submits. On error nothing it started is left running.
func Start(ctx context.Context, cfg Config) (*Stack, error) {
	s := &Stack{}
	if err := s.start(ctx, cfg); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Stack) start(ctx context.Context, cfg Config) error {
	var err error
	for _, f := range []struct {
		fn   **Function
		name string
		port int
	}{{&s.Executor, Executor, cfg.Ports.Executor}, {&s.Notifier, Notifier, cfg.Ports.Notifier}, {&s.Submit, Submit, cfg.Ports.Submit}} {
		lb, err := loadbalance.Start(fmt.Sprintf("127.0.0.1:%d", f.port))
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		*f.fn = &Function{Name: f.name, URL: lb.URL, Balancer: lb}
	}
	s.Wiring, err = cfg.Knative.Wire(ctx, cfg.Rest, eventing.Options{Namespace: cfg.Namespace, ConfigDir: cfg.ConfigDir,
		Addresses: s.Ports().Addresses(), EventLog: cfg.EventLog, Delivery: cfg.Delivery, Timeout: cfg.WireTimeout})
	if err != nil {
		return fmt.Errorf("wire %s through Knative: %w", cfg.Namespace, err)
	}
	s.NotifierLease = NotifierLease(cfg.Namespace)
	if s.leases, err = cfg.electionLeases(); err != nil {
		return err
	}
	for _, f := range []*Function{s.Executor, s.Notifier, s.Submit} {
		if err := f.start(cfg, s.Wiring.BrokerURL); err != nil {
			return err
		}
	}
	return nil
}

// NotifierLease is the leader election Lease of the notifiers of the stack in namespace.
func NotifierLease(namespace string) string { return "async-helm-notifier-" + namespace }

// env is one instance's environment: the stack's own settings first, then the caller's
// (a later KEY= wins in a process's environment).
func (cfg Config) env(fn string, i int, broker string) []string {
	name := InstanceName(fn, i)
	env := append([]string{}, cfg.Env...)
	switch fn {
	case Submit:
		env = append(env, "K_SINK="+broker)
	case Notifier:
		env = append(env, "K_SINK="+broker, "LEADER_ELECTION_NAME="+NotifierLease(cfg.Namespace))
	}
	env = append(env, "POD_NAME="+name, "HOSTNAME="+name)
	env = append(env, cfg.FunctionEnv[fn]...)
	if cfg.InstanceEnv != nil {
		env = append(env, cfg.InstanceEnv(fn, i)...)
	}
	return env
}

// start runs the function's instances at once (each waits for its /healthz), then puts
// them behind the balancer in order.
func (f *Function) start(cfg Config, broker string) error {
	bin, ok := cfg.Bins[f.Name]
	if !ok {
		return fmt.Errorf("no binary for %s", f.Name)
	}
	n := cfg.Counts.of(f.Name)
	procs := make([]*proc.Process, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			log := filepath.Join(cfg.LogDir, InstanceName(f.Name, i)+".log")
			procs[i], errs[i] = proc.Start(bin, 0, log, cfg.env(f.Name, i, broker)...)
		}()
	}
	wg.Wait()
	for i, p := range procs {
		if errs[i] == nil {
			f.Instances = append(f.Instances, p) // Stop stops it
		}
	}
	for i, err := range errs {
		if err != nil {
			return fmt.Errorf("%s: %w", InstanceName(f.Name, i), err)
		}
	}
	for _, p := range f.Instances {
		if err := f.Balancer.Add(p.URL); err != nil {
			return err
		}
	}
	return nil
}

// InstanceName is an instance's name: its POD_NAME and the name of its log.
func InstanceName(fn string, i int) string { return fn + "-" + strconv.Itoa(i) }

// Ports are the balancers' ports, the addresses the Knative Services point at.
func (s *Stack) Ports() eventing.Functions {
	port := func(f *Function) int {
		u, _ := url.Parse(f.URL)
		p, _ := strconv.Atoi(u.Port())
		return p
	}
	return eventing.Functions{Submit: port(s.Submit), Executor: port(s.Executor), Notifier: port(s.Notifier)}
}

// Functions are the three in start order.
func (s *Stack) Functions() []*Function { return []*Function{s.Executor, s.Notifier, s.Submit} }

// Stop stops every instance (SIGTERM, all at once: each drains its own work), closes the
// balancers and deletes the notifiers' election Lease. Instances already killed are left as
// they are.
func (s *Stack) Stop() {
	var wg sync.WaitGroup
	for _, f := range s.Functions() {
		if f == nil {
			continue
		}
		for _, p := range f.Instances {
			if p.Exited() {
				continue
			}
			wg.Add(1)
			go func() { defer wg.Done(); p.Stop() }()
		}
	}
	wg.Wait()
	for _, f := range s.Functions() {
		if f != nil {
			_ = f.Balancer.Close()
		}
	}
	s.deleteNotifierLease()
}

// Spread says how many requests each instance answered, for a report.
func (f *Function) Spread() string {
	out := ""
	for i, st := range f.Balancer.Stats() {
		if i > 0 {
			out += ", "
		}
		out += fmt.Sprintf("%s %d", InstanceName(f.Name, i), st.Served)
	}
	return out
}
