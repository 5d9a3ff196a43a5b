// Package teststack runs the built function binaries as processes wired as the Broker
// would wire them (submit -> executor, notifier -> a sink), for end-to-end tests.
package teststack

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/async-helm/async-helm/internal/testcluster"
)

// Binaries builds the product's commands once into dir and returns their paths by name.
func Binaries(dir string) (map[string]string, error) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	names := []string{"submit", "executor", "notifier", "oc-helm"}
	pkgs := []string{"./functions/submit", "./functions/executor", "./functions/notifier", "./cmd/oc-helm"}
	cmd := exec.Command("go", append([]string{"build", "-o", dir + "/"}, pkgs...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %v\n%s", err, out)
	}
	bins := map[string]string{}
	for _, n := range names {
		bins[n] = filepath.Join(dir, n)
	}
	return bins, nil
}

// Process is one running function.
type Process struct {
	URL  string
	Port int
	cmd  *exec.Cmd
	log  string
	once sync.Once
}

// FreePort asks the kernel for an unused loopback port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Run starts a function binary with env (PORT is chosen here) and waits until /healthz answers.
func Run(t testing.TB, bin string, env map[string]string) *Process {
	t.Helper()
	port, err := FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p := &Process{Port: port, URL: fmt.Sprintf("http://127.0.0.1:%d", port), log: filepath.Join(t.TempDir(), filepath.Base(bin)+".log")}
	p.start(t, bin, env)
	t.Cleanup(func() { p.Stop(syscall.SIGTERM) })
	return p
}

func (p *Process) start(t testing.TB, bin string, env map[string]string) {
	t.Helper()
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(bin)
	p.cmd.Env = append(os.Environ(), fmt.Sprintf("PORT=%d", p.Port))
	for k, v := range env {
		p.cmd.Env = append(p.cmd.Env, k+"="+v)
	}
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p.once = sync.Once{}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(p.URL + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(p.log)
			t.Fatalf("%s not healthy after 30s:\n%s", bin, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop signals the process and waits for it to exit.
func (p *Process) Stop(sig syscall.Signal) {
	p.once.Do(func() {
		_ = p.cmd.Process.Signal(sig)
		done := make(chan struct{})
		go func() { _ = p.cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(45 * time.Second):
			_ = p.cmd.Process.Kill()
			<-done
		}
	})
}

// Restart starts the same binary again on the same port after Stop.
func (p *Process) Restart(t testing.TB, env map[string]string) {
	t.Helper()
	p.start(t, p.cmd.Path, env)
}

// Log is what the process wrote so far.
func (p *Process) Log() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}
