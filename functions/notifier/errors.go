package main

import "net/http"

// statusOf chooses the status of an event the notifier could not take, once, at the edge
// (a refusal of the event itself carries its own: function.StatusError): 503, so that the
// sender tries again.
func statusOf(error) int { return http.StatusServiceUnavailable }
