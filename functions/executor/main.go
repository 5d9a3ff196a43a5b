// Command executor runs the Helm install or upgrade of each accepted request to its end.
package main

import (
	"github.com/async-helm/async-helm/pkg/function"
)

func main() {
	var cfg Config
	function.Main("executor", &cfg, func(r *function.Runtime) (function.Service, error) {
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		return New(cfg, r.Log, r.Ctx, r.Metrics), nil
	})
}
