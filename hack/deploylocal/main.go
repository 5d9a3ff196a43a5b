// Command deploylocal applies manifests resolved by ko (make deploy-local) server-side to
// the cluster of KUBECONFIG: it installs the Knative Serving and Eventing CRDs the cluster
// lacks, creates the signing key Secret when it does not exist, and applies the rest.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"github.com/async-helm/async-helm/internal/knativeapply"
)

func main() {
	file := flag.String("f", ".cache/ko/async-helm.yaml", "resolved manifests (kolocal -out)")
	timeout := flag.Duration("timeout", 2*time.Minute, "bound of the whole apply")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if err := run(ctx, logger, *file); err != nil {
		logger.Error("deploy-local failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, logger *slog.Logger, file string) error {
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(clientcmd.NewDefaultClientConfigLoadingRules(), nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("kubeconfig: %w", err)
	}
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer f.Close()
	objs, err := knativeapply.Decode(f)
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	for _, u := range objs {
		knativeapply.WebhookDefaults(u) // the local cluster runs Eventing without its webhook
	}
	applied, err := knativeapply.Deploy(ctx, cfg, objs, "async-helm-deploy-local")
	if err != nil {
		return err
	}
	for _, u := range applied {
		fmt.Printf("applied %s %s\n", u.GetKind(), qualified(u.GetNamespace(), u.GetName()))
	}
	return nil
}

func qualified(ns, name string) string {
	if ns == "" {
		return name
	}
	return ns + "/" + name
}
