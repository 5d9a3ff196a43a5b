package main

import (
	"errors"
	"net/http"

	"github.com/async-helm/async-helm/pkg/executor"
)

// statusOf chooses the status of an event the executor did not run, once, at the edge
// (a refusal of the event itself carries its own: function.StatusError). The Broker
// redelivers on both.
func statusOf(err error) int {
	if errors.Is(err, executor.ErrBusy) {
		return http.StatusTooManyRequests
	}
	// Held by another executor, cancelled by its sender or failed: another
	// delivery may run it.
	return http.StatusServiceUnavailable
}
