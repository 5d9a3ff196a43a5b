// Command localcluster runs a Kubernetes control plane (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler) and kwok as local processes, for the
// tests and the local run of async-helm. Pods are simulated by kwok.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"time"
)

func main() {
	fs := flag.NewFlagSet("localcluster", flag.ExitOnError)
	dir := fs.String("dir", ".cache/localcluster", "state directory (kubeconfig, logs, etcd data)")
	bin := fs.String("bin", "", "directory of the control-plane binaries (default <dir>/bin)")
	ready := fs.Duration("ready-delay", 500*time.Millisecond, "time until a pod becomes Ready")
	slow := fs.Duration("slow-delay", 60*time.Second, "time until a pod becomes Ready in a slow namespace")
	fs.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: localcluster [flags] up|down|kubeconfig\n")
		fs.PrintDefaults()
	}
	if len(os.Args) < 2 {
		fs.Usage()
		os.Exit(2)
	}
	verb := os.Args[1]
	_ = fs.Parse(os.Args[2:])
	abs, err := filepath.Abs(*dir)
	if err != nil {
		fail(err)
	}
	c := &cluster{dir: abs, bin: *bin, readyDelay: *ready, slowDelay: *slow}
	if c.bin == "" {
		c.bin = filepath.Join(abs, "bin")
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	switch verb {
	case "up":
		err = c.Up(ctx)
	case "down":
		err = c.Down()
	case "kubeconfig":
		fmt.Println(c.Kubeconfig())
	default:
		fs.Usage()
		os.Exit(2)
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "localcluster:", err)
	os.Exit(1)
}
