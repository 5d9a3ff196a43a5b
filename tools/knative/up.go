package main

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// eventing is one set of Knative processes: state under dir, binaries under dir/bin.
type eventing struct {
	dir, kubeconfig string
}

// state is what a running set remembers between `up` calls; internal/eventing reads it too.
type state struct {
	Kubeconfig string `json:"kubeconfig"`
	// KubeconfigSum changes when the cluster is brought up again (new ports, new CA): the
	// processes then hold a stale client and are restarted.
	KubeconfigSum string         `json:"kubeconfigSum"`
	Ports         map[string]int `json:"ports"`
	Pids          map[string]int `json:"pids"`
}

const systemNamespace = "knative-eventing"

// process is one Knative binary and its settings; ports are filled in by up.
type process struct {
	name, bin string
	args      []string
	env       func(p map[string]int) []string
}

var controllerImages = []string{
	"APISERVER_RA_IMAGE", "AUTH_PROXY_IMAGE", "EVENT_TRANSFORM_JSONATA_IMAGE",
	"INTEGRATION_SOURCE_TIMER_IMAGE", "INTEGRATION_SOURCE_AWS_S3_IMAGE", "INTEGRATION_SOURCE_AWS_SQS_IMAGE",
	"INTEGRATION_SOURCE_AWS_DDB_STREAMS_IMAGE", "INTEGRATION_SINK_LOG_IMAGE", "INTEGRATION_SINK_AWS_S3_IMAGE",
	"INTEGRATION_SINK_AWS_SQS_IMAGE", "INTEGRATION_SINK_AWS_SNS_IMAGE",
}

// processes in start order; down stops them in reverse (data plane first, then controllers,
// the proxy last).
var processes = []process{
	{name: "controller", bin: "controller", args: []string{"--disable-ha"}, env: func(map[string]int) []string {
		var env []string
		for _, v := range controllerImages {
			env = append(env, v+"=none.invalid/"+strings.ToLower(v)) // never run: no pods here
		}
		return env
	}},
	{name: "mtchannel-broker", bin: "mtchannel_broker", args: []string{"--disable-ha"}},
	{name: "imc-controller", bin: "imc_controller", args: []string{"--disable-ha"},
		env: func(map[string]int) []string { return []string{"DISPATCHER_IMAGE=none.invalid/imc-dispatcher"} }},
	// No NAMESPACE: with it the dispatcher silently watches that namespace only.
	{name: "imc-dispatcher", bin: "imc_dispatcher", args: []string{"--disable-ha"}, env: func(p map[string]int) []string {
		return []string{"CONTAINER_NAME=dispatcher", "MAX_IDLE_CONNS=1000", "MAX_IDLE_CONNS_PER_HOST=100",
			port("IMC_DISPATCHER_PORT", p["dispatcher"]), port("IMC_DISPATCHER_PORT_HTTPS", p["dispatcher-https"])}
	}},
	{name: "broker-ingress", bin: "ingress", env: func(p map[string]int) []string {
		return []string{"NAMESPACE=" + systemNamespace, "CONTAINER_NAME=ingress",
			port("INGRESS_PORT", p["ingress"]), port("INGRESS_PORT_HTTPS", p["ingress-https"])}
	}},
	{name: "broker-filter", bin: "filter", env: func(p map[string]int) []string {
		return []string{"NAMESPACE=" + systemNamespace, "CONTAINER_NAME=filter",
			port("FILTER_PORT", p["filter"]), port("FILTER_PORT_HTTPS", p["filter-https"])}
	}},
}

func port(name string, p int) string { return name + "=" + strconv.Itoa(p) }

func (e *eventing) path(p ...string) string { return filepath.Join(append([]string{e.dir}, p...)...) }

func (e *eventing) load() (*state, error) {
	b, err := os.ReadFile(e.path("state.json"))
	if err != nil {
		return nil, err
	}
	var s state
	return &s, json.Unmarshal(b, &s)
}

func (e *eventing) save(s *state) error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(e.path("state.json"), b, 0o600)
}

// running reports whether the recorded processes are all alive, for this kubeconfig.
func (e *eventing) running() (*state, bool) {
	s, err := e.load()
	if err != nil || len(s.Pids) != len(processes)+1 || s.Kubeconfig != e.kubeconfig || s.KubeconfigSum != fileSum(e.kubeconfig) {
		return s, false
	}
	for _, pid := range s.Pids {
		if syscall.Kill(pid, 0) != nil {
			return s, false
		}
	}
	return s, true
}

// Up applies Knative's CRDs and config and starts the processes, or reuses running ones.
func (e *eventing) Up(ctx context.Context) error {
	start := time.Now()
	if e.kubeconfig == "" {
		return errors.New("no kubeconfig: set KUBECONFIG or -kubeconfig")
	}
	if s, ok := e.running(); ok {
		fmt.Printf("knative eventing already up (ingress 127.0.0.1:%d; %s)\n", s.Ports["ingress"], e.rss(s))
		return nil
	}
	if err := e.stop(); err != nil { // leftovers of a half-dead set
		return err
	}
	if err := os.MkdirAll(e.path("logs"), 0o755); err != nil {
		return err
	}
	k, err := newKube(e.kubeconfig)
	if err != nil {
		return err
	}
	applied, err := k.applyDir(ctx, e.path("config"))
	if err != nil {
		return fmt.Errorf("install Knative CRDs and config: %w", err)
	}
	s := &state{Kubeconfig: e.kubeconfig, KubeconfigSum: fileSum(e.kubeconfig), Ports: map[string]int{}, Pids: map[string]int{}}
	for _, name := range []string{"proxy", "ingress", "ingress-https", "filter", "filter-https", "dispatcher", "dispatcher-https"} {
		if s.Ports[name], err = freePort(); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	if err := e.spawn(s, "proxy", self, nil, "proxy", "-listen", fmt.Sprintf("127.0.0.1:%d", s.Ports["proxy"]),
		"-ingress", strconv.Itoa(s.Ports["ingress"]), "-filter", strconv.Itoa(s.Ports["filter"]),
		"-dispatcher", strconv.Itoa(s.Ports["dispatcher"])); err != nil {
		return err
	}
	proxy := fmt.Sprintf("http://127.0.0.1:%d", s.Ports["proxy"])
	for _, p := range processes {
		env := []string{
			"KUBECONFIG=" + e.kubeconfig, "SYSTEM_NAMESPACE=" + systemNamespace,
			"CONFIG_LOGGING_NAME=config-logging", "CONFIG_OBSERVABILITY_NAME=config-observability",
			"METRICS_DOMAIN=knative.dev/eventing", "POD_NAME=" + p.name, "PROFILING_PORT=0",
			// Cluster names (*.svc.cluster.local) go through the proxy; loopback (the API
			// server, the functions) is never proxied by Go. HTTPS_PROXY makes in-cluster
			// https lookups fail at once instead of waiting on DNS.
			"HTTP_PROXY=" + proxy, "HTTPS_PROXY=" + proxy,
		}
		if p.env != nil {
			env = append(env, p.env(s.Ports)...)
		}
		if err := e.spawn(s, p.name, e.path("bin", p.bin), env, p.args...); err != nil {
			return err
		}
	}
	for _, name := range []string{"proxy", "ingress", "filter", "dispatcher"} {
		if err := e.waitPort(ctx, s, name, 60*time.Second); err != nil {
			return err
		}
	}
	fmt.Printf("knative eventing up in %.1fs (%d objects applied; broker ingress 127.0.0.1:%d, filter :%d, dispatcher :%d, proxy :%d; logs %s; %s)\n",
		time.Since(start).Seconds(), applied, s.Ports["ingress"], s.Ports["filter"], s.Ports["dispatcher"], s.Ports["proxy"],
		e.path("logs"), e.rss(s))
	return nil
}

// spawn starts a process in its own session (it outlives `up` and a Ctrl-C in its terminal)
// with a clean environment: an inherited NAMESPACE or NO_PROXY would change its behaviour.
func (e *eventing) spawn(s *state, name, bin string, env []string, args ...string) error {
	logf, err := os.Create(e.path("logs", name+".log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(bin, args...)
	cmd.Env = append(baseEnv(), env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", name, err)
	}
	s.Pids[name] = cmd.Process.Pid
	go func() { _ = cmd.Wait() }()
	return e.save(s)
}

func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch strings.ToUpper(k) {
		case "NAMESPACE", "NO_PROXY", "HTTP_PROXY", "HTTPS_PROXY", "KUBECONFIG", "PORT":
			continue
		}
		env = append(env, kv)
	}
	return env
}

func (e *eventing) waitPort(ctx context.Context, s *state, name string, timeout time.Duration) error {
	addr := fmt.Sprintf("127.0.0.1:%d", s.Ports[name])
	deadline := time.Now().Add(timeout)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return nil
		}
		for proc, pid := range s.Pids {
			if syscall.Kill(pid, 0) != nil {
				return fmt.Errorf("%s exited during start-up (log %s)", proc, e.path("logs", proc+".log"))
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not listening on %s after %s (logs %s)", name, addr, timeout, e.path("logs"))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// rss sums the resident memory of the Knative processes.
func (e *eventing) rss(s *state) string {
	names := make([]string, 0, len(s.Pids))
	for n := range s.Pids {
		names = append(names, n)
	}
	sort.Strings(names)
	total := 0
	var parts []string
	for _, n := range names {
		kb := rssKB(s.Pids[n])
		total += kb
		parts = append(parts, fmt.Sprintf("%s %d", n, kb/1024))
	}
	return fmt.Sprintf("RSS %d MB: %s", total/1024, strings.Join(parts, ", "))
}

func rssKB(pid int) int {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return kb
		}
	}
	return 0
}

// Down deletes the namespaces that hold Subscriptions while the controllers still run (their
// finalizers need them), then stops the processes: data plane, controllers, proxy.
func (e *eventing) Down(ctx context.Context) error {
	s, err := e.load()
	if err == nil && s.Pids["controller"] != 0 && syscall.Kill(s.Pids["controller"], 0) == nil {
		k, err := newKube(s.Kubeconfig)
		if err == nil {
			err = k.deleteSubscriptionNamespaces(ctx, time.Minute)
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "knative: %v (stopping anyway)\n", err)
		}
	}
	return e.stop()
}

func (e *eventing) stop() error {
	s, err := e.load()
	if err == nil {
		groups := [][]string{{"broker-ingress", "broker-filter", "imc-dispatcher"},
			{"mtchannel-broker", "imc-controller", "controller"}, {"proxy"}}
		for _, g := range groups {
			var wg sync.WaitGroup
			for _, name := range g {
				if pid, ok := s.Pids[name]; ok {
					wg.Add(1)
					go func() { defer wg.Done(); stopProcess(pid) }()
				}
			}
			wg.Wait()
		}
	}
	if err := os.Remove(e.path("state.json")); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}

// stopProcess sends SIGTERM and, after 5 s, SIGKILL (the InMemoryChannel controller takes
// ~40 s to drain on SIGTERM; it holds nothing worth waiting for).
func stopProcess(pid int) {
	if syscall.Kill(pid, syscall.SIGTERM) != nil {
		return
	}
	for i := 0; i < 50; i++ {
		if syscall.Kill(pid, 0) != nil {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(pid, syscall.SIGKILL)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func fileSum(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}
