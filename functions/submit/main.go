// Command submit answers Helm install/upgrade requests at once with the reserved release
// secret and hands the work to the executor as a CloudEvent. Started as a render worker
// (the template route's renders), it is one from pkg/helmexec's init.
package main

import "github.com/async-helm/async-helm/pkg/function"

func main() {
	var cfg Config
	function.Main("submit", &cfg, func(r *function.Runtime) (function.Service, error) {
		if err := cfg.Validate(); err != nil {
			return nil, err
		}
		return New(cfg, r.Log, r.Metrics), nil
	})
}
