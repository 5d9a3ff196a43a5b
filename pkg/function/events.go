package function

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/binding"
	"github.com/cloudevents/sdk-go/v2/protocol"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/async-helm/async-helm/pkg/api"
)

// EventFunc handles one CloudEvent with the context of the HTTP request that carried it
// (its deadline, its cancellation, the caller authenticated on it). A nil result is an ACK.
type EventFunc func(ctx context.Context, e cloudevents.Event) (*cloudevents.Event, protocol.Result)

// ProbeType is the event /healthz sends through an event handler; EventHandler answers
// it without calling the function.
const ProbeType = "dev.asynchelm.probe"

// EventHandler serves CloudEvents (binary or structured) with fn. Each request's event is
// parsed inside that request's own handler: sdk-go's shared-channel receive handler hands messages
// to whichever goroutine reads its shared channel next, with that goroutine's context, so
// one caller's event could run with another caller's identity (../shared/NOTES.md).
func EventHandler(fn EventFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r.Body = http.MaxBytesReader(w, r.Body, api.MaxEventBytes)
		e, err := cehttp.NewEventFromHTTPRequest(r)
		if err != nil {
			var tooBig *http.MaxBytesError
			if errors.As(err, &tooBig) {
				http.Error(w, fmt.Sprintf("event larger than %d bytes", api.MaxEventBytes), http.StatusRequestEntityTooLarge)
				return
			}
			http.Error(w, "not a CloudEvent: "+err.Error(), http.StatusBadRequest)
			return
		}
		if e.Type() == ProbeType {
			w.WriteHeader(http.StatusOK)
			return
		}
		reply, res := fn(r.Context(), *e)
		status, msg := resultStatus(res)
		if reply != nil && status < 300 {
			if err := cehttp.WriteResponseWriter(r.Context(), binding.ToMessage(reply), status, w); err != nil {
				http.Error(w, "write reply: "+err.Error(), http.StatusInternalServerError)
			}
			return
		}
		if status < 300 {
			// An acknowledgement has no body: a Broker's filter takes a non-empty answer that
			// is not a CloudEvent for a failed delivery (502), and the channel redelivers it.
			w.WriteHeader(status)
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(status)
		_, _ = w.Write([]byte(msg))
	})
}

// resultStatus maps a handler's result to an HTTP status, as sdk-go's receiver does.
func resultStatus(res protocol.Result) (int, string) {
	if res == nil {
		return http.StatusOK, ""
	}
	var hr *cehttp.Result
	if errors.As(res, &hr) {
		return hr.StatusCode, hr.Error()
	}
	if protocol.IsACK(res) {
		return http.StatusOK, ""
	}
	return http.StatusInternalServerError, res.Error()
}

// Healthz answers 200 only when the event handler h answers a probe event within 2 s, so a
// pod whose event endpoint cannot serve is restarted by Knative.
func Healthz(h http.Handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/", strings.NewReader(""))
		req.Header.Set("Ce-Specversion", "1.0")
		req.Header.Set("Ce-Id", "healthz")
		req.Header.Set("Ce-Type", ProbeType)
		req.Header.Set("Ce-Source", "/healthz")
		rec := httptest.NewRecorder()
		done := make(chan struct{})
		go func() { defer close(done); h.ServeHTTP(rec, req) }()
		select {
		case <-done:
		case <-ctx.Done():
			http.Error(w, "event handler did not answer a probe within 2s", http.StatusServiceUnavailable)
			return
		}
		if rec.Code != http.StatusOK {
			http.Error(w, fmt.Sprintf("event handler answered a probe with %d", rec.Code), http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	}
}
