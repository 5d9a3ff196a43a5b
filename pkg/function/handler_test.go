package function

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"

	"github.com/async-helm/async-helm/pkg/api"
)

var errGone = errors.New("gone")

func testAdapter() Adapter {
	return Adapter{
		Status: func(err error) int {
			if errors.Is(err, errGone) {
				return http.StatusNotFound
			}
			return http.StatusInternalServerError
		},
		Header: func(h http.Header, err error) {
			if errors.Is(err, errGone) {
				h.Set("X-Gone", "yes")
			}
		},
	}
}

// serve runs h through the adapter and returns the recorded answer.
func serve(t *testing.T, a Adapter, h HandlerFunc) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	a.Func(h)(rec, httptest.NewRequest(http.MethodGet, "/x", nil))
	return rec
}

func apiError(t *testing.T, rec *httptest.ResponseRecorder) string {
	t.Helper()
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", ct)
	}
	var body api.Error
	if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q: %v", rec.Body, err)
	}
	return body.Error
}

func TestAdapterAnswersAReturnedErrorWithItsMappedStatus(t *testing.T) {
	rec := serve(t, testAdapter(), func(http.ResponseWriter, *http.Request) error {
		return fmt.Errorf("read web: %w", errGone)
	})
	if rec.Code != http.StatusNotFound {
		t.Errorf("status %d, want 404", rec.Code)
	}
	if got := apiError(t, rec); got != "read web: gone" {
		t.Errorf("error %q", got)
	}
	if rec.Header().Get("X-Gone") != "yes" {
		t.Errorf("the Header hook did not run: %v", rec.Header())
	}
}

func TestAdapterKeepsTheStatusARouteChose(t *testing.T) {
	rec := serve(t, testAdapter(), func(http.ResponseWriter, *http.Request) error {
		// The route's choice wins over the mapping of the error it wraps.
		return &StatusError{Code: http.StatusTooManyRequests, Err: fmt.Errorf("busy: %w", errGone), RetryAfter: 1500 * time.Millisecond}
	})
	if rec.Code != http.StatusTooManyRequests {
		t.Errorf("status %d, want 429", rec.Code)
	}
	if got := rec.Header().Get("Retry-After"); got != "2" {
		t.Errorf("Retry-After %q, want 2 (rounded up)", got)
	}
	if got := apiError(t, rec); got != "busy: gone" {
		t.Errorf("error %q", got)
	}
}

func TestAdapterLeavesASuccessfulAnswerAlone(t *testing.T) {
	rec := serve(t, Adapter{}, func(w http.ResponseWriter, _ *http.Request) error {
		WriteJSON(w, http.StatusCreated, map[string]string{"a": "b"})
		return nil
	})
	if rec.Code != http.StatusCreated || strings.TrimSpace(rec.Body.String()) != `{"a":"b"}` {
		t.Errorf("answer %d %q", rec.Code, rec.Body)
	}
}

func TestAdapterWithoutMappingAnswers500(t *testing.T) {
	rec := serve(t, Adapter{}, func(http.ResponseWriter, *http.Request) error { return errGone })
	if rec.Code != http.StatusInternalServerError {
		t.Errorf("status %d, want 500", rec.Code)
	}
}

func TestEventsAnswersAnErrorWithTheAdaptersStatus(t *testing.T) {
	a := testAdapter()
	e := cloudevents.NewEvent()
	fail := a.Events(func(context.Context, cloudevents.Event) (EventReply, error) {
		return EventReply{}, fmt.Errorf("deliver: %w", errGone)
	})
	reply, res := fail(context.Background(), e)
	code, msg := resultStatus(res)
	if reply != nil || code != http.StatusNotFound || !strings.Contains(msg, "deliver: gone") {
		t.Errorf("reply %v, result %d %q", reply, code, msg)
	}
	chosen := a.Events(func(context.Context, cloudevents.Event) (EventReply, error) {
		return EventReply{}, WithStatus(http.StatusUnauthorized, errGone)
	})
	if _, res := chosen(context.Background(), e); res == nil {
		t.Fatal("no result")
	} else if code, _ := resultStatus(res); code != http.StatusUnauthorized {
		t.Errorf("status %d, want 401", code)
	}
	ok := a.Events(func(context.Context, cloudevents.Event) (EventReply, error) {
		return EventReply{Event: &e}, nil
	})
	if reply, res := ok(context.Background(), e); reply != &e || res != nil {
		t.Errorf("success became reply %v, result %v", reply, res)
	}
}
