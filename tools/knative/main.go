// Command knative runs Knative Eventing v0.50.0 (core controller, mt-channel Broker
// controller, Broker ingress and filter, InMemoryChannel controller and dispatcher) as local
// processes against a Kubernetes API server, for make run and the tests of async-helm.
//
//	knative prepare -dir D   copy CRDs/config from the module zips and write the dispatcher's port overlay (build step)
//	knative up -dir D        apply CRDs and config, start the processes (reused when already up)
//	knative down -dir D      delete namespaces holding Subscriptions, then stop the processes
//	knative proxy ...        the forward proxy that stands in for cluster DNS (started by up)
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	verb := os.Args[1]
	fs := flag.NewFlagSet("knative "+verb, flag.ExitOnError)
	dir := fs.String("dir", ".cache/knative", "state directory (binaries under bin/, config/, logs/, state.json)")
	kubeconfig := fs.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig of the cluster")
	listen := fs.String("listen", "127.0.0.1:0", "proxy: listen address")
	ingress := fs.Int("ingress", 0, "proxy: port of broker-ingress")
	filter := fs.Int("filter", 0, "proxy: port of broker-filter")
	dispatcher := fs.Int("dispatcher", 0, "proxy: port of the InMemoryChannel dispatcher")
	_ = fs.Parse(os.Args[2:])
	abs, err := filepath.Abs(*dir)
	if err != nil {
		fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	e := &eventing{dir: abs, kubeconfig: *kubeconfig}
	switch verb {
	case "prepare":
		err = prepare(ctx, abs)
	case "up":
		err = e.Up(ctx)
	case "down":
		err = e.Down(ctx)
	case "proxy":
		err = runProxy(ctx, *listen, map[string]int{"ingress": *ingress, "filter": *filter, "dispatcher": *dispatcher})
	default:
		usage()
	}
	if err != nil {
		fail(err)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: knative prepare|up|down|proxy [-dir D] [-kubeconfig K]")
	os.Exit(2)
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "knative:", err)
	os.Exit(1)
}
