// Command notifier reports every status change of Helm releases as a CloudEvent.
package main

import (
	"github.com/async-helm/async-helm/pkg/function"
)

func main() {
	var cfg Config
	function.Main("notifier", &cfg, func(r *function.Runtime) (function.Service, error) {
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		return New(cfg, r.Log, r.Metrics), nil
	})
}
