package function

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	"github.com/cloudevents/sdk-go/v2/protocol"
	"go.uber.org/zap"

	"github.com/async-helm/async-helm/pkg/api"
)

// HandlerFunc is a route that returns its error instead of answering it: the function's
// one Adapter answers the error, so its status codes are chosen in one place.
type HandlerFunc func(w http.ResponseWriter, r *http.Request) error

// StatusError is a refusal whose status the route chose (one the function's error mapping
// cannot know, such as a render the chart decides); its message is Err's.
type StatusError struct {
	Code int
	Err  error
	// RetryAfter, when positive, is sent as Retry-After in whole seconds, rounded up.
	RetryAfter time.Duration
}

func (e *StatusError) Error() string { return e.Err.Error() }

// Unwrap lets errors.Is see the refusal's cause.
func (e *StatusError) Unwrap() error { return e.Err }

// WithStatus is err answered with code.
func WithStatus(code int, err error) error { return &StatusError{Code: code, Err: err} }

// Adapter turns the errors routes return into their answers.
type Adapter struct {
	// Status maps an error without a StatusError to its status; nil: 500 for all.
	Status func(error) int
	// Header adds the headers an error's answer carries (Retry-After); nil: none.
	Header func(h http.Header, err error)
	// Log gets a line per refusal (Info) or failure (Error, 5xx the route did not choose); nil: none.
	Log *zap.SugaredLogger
}

// StatusOf is err's status: a StatusError's own, else the Status mapping's.
func (a Adapter) StatusOf(err error) int {
	var se *StatusError
	if errors.As(err, &se) {
		return se.Code
	}
	if a.Status == nil {
		return http.StatusInternalServerError
	}
	return a.Status(err)
}

// Func serves h; an error h returns is answered as the API's error (pkg/api's Error as JSON).
func (a Adapter) Func(h HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			a.Answer(w, r, err)
		}
	}
}

// Answer writes err as the API's error answer.
func (a Adapter) Answer(w http.ResponseWriter, r *http.Request, err error) {
	code := a.StatusOf(err)
	var se *StatusError
	chosen := errors.As(err, &se)
	if chosen && se.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(se.RetryAfter.Seconds()))))
	}
	if a.Header != nil {
		a.Header(w.Header(), err)
	}
	if a.Log != nil {
		if code >= 500 && !chosen {
			a.Log.Errorw("request failed", "method", r.Method, "path", r.URL.Path, "status", code, "error", err)
		} else {
			a.Log.Infow("request refused", "method", r.Method, "path", r.URL.Path, "status", code, "error", err)
		}
	}
	WriteJSON(w, code, api.Error{Error: err.Error()})
}

// WriteJSON answers v as JSON with code.
func WriteJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v)
}

// EventReply is what an event route answers when it succeeds: a reply event (or none) and
// its result (nil: an ACK).
type EventReply struct {
	Event  *cloudevents.Event
	Result protocol.Result
}

// EventRoute handles one CloudEvent and returns its error instead of a result.
type EventRoute func(ctx context.Context, e cloudevents.Event) (EventReply, error)

// Events serves fn's errors as CloudEvents results with the adapter's status and the error as
// the message. It logs nothing: a route logs with its event's id.
func (a Adapter) Events(fn EventRoute) EventFunc {
	return func(ctx context.Context, e cloudevents.Event) (*cloudevents.Event, protocol.Result) {
		reply, err := fn(ctx, e)
		if err != nil {
			return nil, cloudevents.NewHTTPResult(a.StatusOf(err), "%v", err)
		}
		return reply.Event, reply.Result
	}
}
