// Package function is the runtime every async-helm function shares: typed environment,
// structured logging and signal handling from knative.dev/pkg, an HTTP server with
// graceful shutdown.
package function

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/kelseyhightower/envconfig"
	"go.uber.org/zap"
	"knative.dev/pkg/logging"
	"knative.dev/pkg/signals"
)

// Service is one function: Start opens its clients, Handler serves it, Drain finishes the
// work left once it takes no more requests (submit's events sent behind their answers),
// within what is left of SHUTDOWN_TIMEOUT.
type Service interface {
	Start(ctx context.Context) error
	Handler() http.Handler
	Drain(ctx context.Context)
}

// Runtime is what Main gives a function's constructor.
type Runtime struct {
	Log     *zap.SugaredLogger
	Metrics *Metrics
	// Ctx ends on SIGTERM/SIGINT: long work in flight must wind down when it does.
	Ctx context.Context
}

// server is the part of the environment Main reads for every function.
type server struct {
	Port            int           `envconfig:"PORT" default:"8080"`
	LogLevel        string        `envconfig:"LOG_LEVEL" default:"info"`
	ShutdownTimeout time.Duration `envconfig:"SHUTDOWN_TIMEOUT" default:"30s"`
	// CPUProfile, when set, is a file that gets a CPU profile (pprof) of the process's
	// whole life, written at shutdown: `make bench` sets it under BENCH_PPROF_DIR.
	CPUProfile string `envconfig:"CPU_PROFILE"`
	// HeapProfile, when set, is a file that gets a heap profile (pprof) at shutdown: what
	// the process still holds then, and all it allocated (`make bench`'s bigcluster section).
	HeapProfile string `envconfig:"HEAP_PROFILE"`
	// MetricsAuth: "on" serves /metrics only to a caller allowed "get" on it, "off" to
	// anyone; empty is on in a pod and off for a local process (MetricsGuard).
	MetricsAuth string `envconfig:"METRICS_AUTH"`
}

// Main parses cfg from the environment, builds the function and serves it until a
// signal; it exits non-zero on any error.
func Main(name string, cfg any, build func(*Runtime) (Service, error)) {
	start := time.Now()
	if err := run(name, cfg, build, start); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

func run(name string, cfg any, build func(*Runtime) (Service, error), start time.Time) error {
	var srvCfg server
	if err := envconfig.Process("", &srvCfg); err != nil {
		return err
	}
	if err := envconfig.Process("", cfg); err != nil {
		return err
	}
	if srvCfg.CPUProfile != "" {
		stop, err := startCPUProfile(srvCfg.CPUProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if srvCfg.HeapProfile != "" {
		defer writeHeapProfile(srvCfg.HeapProfile)
	}
	log, _ := logging.NewLogger("", srvCfg.LogLevel)
	log = log.Named(name)
	defer func() { _ = log.Sync() }()
	ctx := signals.NewContext()
	metrics := newMetrics(name)
	guard, err := metricsGuardFor(srvCfg.MetricsAuth)
	if err != nil {
		return err
	}
	metrics.guard = guard
	svc, err := build(&Runtime{Log: log, Ctx: ctx, Metrics: metrics})
	if err != nil {
		return err
	}
	if err := svc.Start(ctx); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	ln, err := net.Listen("tcp", fmt.Sprintf(":%d", srvCfg.Port))
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: metrics.instrument(svc.Handler()), ReadHeaderTimeout: 10 * time.Second}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	log.Infow("ready", "addr", ln.Addr().String(), "startup", time.Since(start).String())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	log.Infow("shutting down")
	shutdownCtx, cancel := context.WithTimeout(context.Background(), srvCfg.ShutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("shutdown: %w", err)
	}
	svc.Drain(shutdownCtx)
	return nil
}

// writeHeapProfile writes the heap's profile to path after a GC (best effort: the
// process is ending).
func writeHeapProfile(path string) {
	f, err := os.Create(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "HEAP_PROFILE: %v\n", err)
		return
	}
	defer f.Close()
	runtime.GC()
	if err := pprof.WriteHeapProfile(f); err != nil {
		fmt.Fprintf(os.Stderr, "HEAP_PROFILE: %v\n", err)
	}
}

// startCPUProfile profiles the process until the returned func is called.
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("CPU_PROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("CPU_PROFILE: %w", err)
	}
	return func() { pprof.StopCPUProfile(); _ = f.Close() }, nil
}
