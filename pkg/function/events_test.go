package function

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"

	"github.com/async-helm/async-helm/pkg/api"
)

type callerKey struct{}

// Each event is handled with the context of the request that carried it: a value put on
// that request (the authenticated caller) is the one the handler sees.
func TestEachEventGetsItsOwnRequestContext(t *testing.T) {
	h := EventHandler(func(ctx context.Context, e cloudevents.Event) (*cloudevents.Event, cloudevents.Result) {
		if got := ctx.Value(callerKey{}); got != e.ID() {
			return nil, cloudevents.NewHTTPResult(http.StatusConflict, "event %s handled as caller %v", e.ID(), got)
		}
		return nil, nil
	})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, r.Header.Get("Ce-Id"))))
	}))
	defer srv.Close()
	var wg sync.WaitGroup
	errs := make(chan string, 400)
	for i := 0; i < 400; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			e := cloudevents.NewEvent()
			e.SetID(fmt.Sprintf("caller-%d", i))
			e.SetSource("/test")
			e.SetType("test")
			req, _ := cehttp.NewHTTPRequestFromEvent(context.Background(), srv.URL, e)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				errs <- err.Error()
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				errs <- fmt.Sprintf("%s: %d", e.ID(), resp.StatusCode)
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

func TestEventHandlerAnswers(t *testing.T) {
	h := EventHandler(func(ctx context.Context, e cloudevents.Event) (*cloudevents.Event, cloudevents.Result) {
		if e.Type() == "reply" {
			r := cloudevents.NewEvent()
			r.SetID("r")
			r.SetSource("/test")
			r.SetType("reply.done")
			return &r, cloudevents.NewHTTPResult(http.StatusCreated, "made")
		}
		if e.Type() == "ack" {
			return nil, cloudevents.NewHTTPResult(http.StatusOK, "deployed")
		}
		return nil, cloudevents.NewHTTPResult(http.StatusTooManyRequests, "busy")
	})
	post := func(typ string, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		req.Header.Set("Ce-Specversion", "1.0")
		req.Header.Set("Ce-Id", "1")
		req.Header.Set("Ce-Source", "/t")
		req.Header.Set("Ce-Type", typ)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	if rec := post("reply", ""); rec.Code != http.StatusCreated || rec.Header().Get("Ce-Type") != "reply.done" {
		t.Errorf("reply: %d %v", rec.Code, rec.Header())
	}
	if rec := post("x", ""); rec.Code != http.StatusTooManyRequests || !strings.Contains(rec.Body.String(), "busy") {
		t.Errorf("nack: %d %q", rec.Code, rec.Body.String())
	}
	if rec := post("ack", ""); rec.Code != http.StatusOK || rec.Body.Len() != 0 {
		t.Errorf("an acknowledgement with a message must have no body (a Broker's filter redelivers otherwise): %d %q", rec.Code, rec.Body.String())
	}
	if rec := post("x", strings.Repeat("x", api.MaxEventBytes+1)); rec.Code != http.StatusRequestEntityTooLarge {
		t.Errorf("oversized event: %d", rec.Code)
	}
	req := httptest.NewRequest(http.MethodPost, "/", strings.NewReader("{}"))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadRequest {
		t.Errorf("not a CloudEvent: %d", rec.Code)
	}
}

func TestHealthzFailsWhenTheEventHandlerCannotServe(t *testing.T) {
	ok := Healthz(EventHandler(func(context.Context, cloudevents.Event) (*cloudevents.Event, cloudevents.Result) { return nil, nil }))
	rec := httptest.NewRecorder()
	ok(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusOK {
		t.Errorf("healthy handler: %d", rec.Code)
	}
	stuck := Healthz(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done(); time.Sleep(100 * time.Millisecond) }))
	rec = httptest.NewRecorder()
	start := time.Now()
	stuck(rec, httptest.NewRequest(http.MethodGet, "/healthz", nil))
	if rec.Code != http.StatusServiceUnavailable || time.Since(start) > 5*time.Second {
		t.Errorf("stuck handler: %d after %s", rec.Code, time.Since(start))
	}
}
