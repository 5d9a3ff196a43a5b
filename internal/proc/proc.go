// Package proc runs a function binary as a local process on a port of its own and waits
// until it answers /healthz: for make run, the end-to-end tests, the benchmarks and chaos.
package proc

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is one running function.
type Process struct {
	Bin  string
	Port int
	URL  string
	Env  []string
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
	// Started is how long the last start took from exec to a healthy /healthz.
	Started time.Duration
	// StartupLimit bounds a start's wait for a healthy /healthz (DefaultStartupLimit when 0).
	StartupLimit time.Duration
}

// DefaultStartupLimit is how long a start waits for a healthy /healthz unless told otherwise.
const DefaultStartupLimit = 30 * time.Second

// FreePort asks the kernel for an unused loopback port.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// Start runs bin with env plus PORT (0 picks a free port), logging to logPath.
func Start(bin string, port int, logPath string, env ...string) (*Process, error) {
	return StartWithin(DefaultStartupLimit, bin, port, logPath, env...)
}

// StartWithin is Start with its own bound on the wait for a healthy /healthz: a process
// whose start-up is itself measured (a first list of a big cluster) may take longer.
func StartWithin(limit time.Duration, bin string, port int, logPath string, env ...string) (*Process, error) {
	if port == 0 {
		var err error
		if port, err = FreePort(); err != nil {
			return nil, err
		}
	}
	p := &Process{Bin: bin, Port: port, URL: fmt.Sprintf("http://127.0.0.1:%d", port), Env: env, Log: logPath, StartupLimit: limit}
	return p, p.start()
}

func (p *Process) start() error {
	logf, err := os.OpenFile(p.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	p.cmd = exec.Command(p.Bin)
	p.cmd.Env = append(append(os.Environ(), fmt.Sprintf("PORT=%d", p.Port)), p.Env...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = sysProcAttr()
	t0 := time.Now()
	if err := p.cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", p.Bin, err)
	}
	p.done = make(chan struct{})
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	client := &http.Client{Timeout: time.Second}
	limit := p.StartupLimit
	if limit <= 0 {
		limit = DefaultStartupLimit
	}
	for time.Since(t0) < limit {
		if resp, err := client.Get(p.URL + "/healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				p.Started = time.Since(t0)
				return nil
			}
		}
		select {
		case <-p.done:
			b, _ := os.ReadFile(p.Log)
			return fmt.Errorf("%s exited during start-up:\n%s", p.Bin, b)
		case <-time.After(time.Millisecond):
		}
	}
	p.Kill()
	return fmt.Errorf("%s not healthy after %s (log %s)", p.Bin, limit, p.Log)
}

// Exited reports whether the process has ended (crashed, or stopped and not restarted).
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Pid of the running process.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM and waits (SIGKILL after 45 s).
func (p *Process) Stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(45 * time.Second):
		p.Kill()
	}
}

// Kill sends SIGKILL and waits.
func (p *Process) Kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Restart starts the same binary again on the same port and environment.
func (p *Process) Restart() error { return p.start() }

// Output is what the process logged so far.
func (p *Process) Output() string {
	b, _ := os.ReadFile(p.Log)
	return string(b)
}
