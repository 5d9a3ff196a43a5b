// Command submit answers Helm install/upgrade requests at once with the reserved release
// secret and hands the work to the executor as a CloudEvent.
package main

import (
	"os"

	"github.com/async-helm/async-helm/pkg/function"
	"github.com/async-helm/async-helm/pkg/helmexec"
)

func main() {
	if helmexec.IsRenderChild(os.Args) { // the template route's render, in a child it can kill
		os.Exit(helmexec.RunRenderChild(os.Args, os.Stdin, os.Stdout))
	}
	var cfg Config
	function.Main("submit", &cfg, func(r *function.Runtime) (function.Service, error) {
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		return New(cfg, r.Log, r.Metrics), nil
	})
}
