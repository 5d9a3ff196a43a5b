package submitclient

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/api"
)

// seen is one request as submit received it.
type seen struct {
	method, path, query, auth, contentType string
	body                                   api.ReleaseRequest
}

// fakeSubmit answers each route as submit does, and records what it was sent.
func fakeSubmit(t *testing.T, status int, answer any) (*httptest.Server, *[]seen) {
	t.Helper()
	var got []seen
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{method: r.Method, path: r.URL.Path, query: r.URL.RawQuery, auth: r.Header.Get("Authorization"),
			contentType: r.Header.Get("Content-Type")}
		if r.Body != nil {
			raw, _ := io.ReadAll(r.Body)
			if len(raw) > 0 {
				if err := json.Unmarshal(raw, &s.body); err != nil {
					t.Errorf("body is not a release request: %s", raw)
				}
			}
		}
		got = append(got, s)
		w.WriteHeader(status)
		switch a := answer.(type) {
		case string:
			_, _ = io.WriteString(w, a)
		default:
			_ = json.NewEncoder(w).Encode(a)
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &got
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestInstallAndUpgrade(t *testing.T) {
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.web.v1", Namespace: "ns"}}
	srv, got := fakeSubmit(t, http.StatusCreated, sec)
	c := &Client{Server: srv.URL + "/", Token: "t0k"}
	req := api.ReleaseRequest{Name: "web", Namespace: "ns", ChartURL: "https://charts.example/tiny.tgz", Values: map[string]any{"a": "b"}}
	out, err := c.Install(ctx(t), req)
	if err != nil || out.Name != sec.Name {
		t.Fatalf("Install = %v, %v", out, err)
	}
	if _, err := c.Upgrade(ctx(t), req); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{http.MethodPost, http.MethodPut} {
		s := (*got)[i]
		if s.method != want || s.path != api.PathAsync || s.auth != "Bearer t0k" || s.contentType != "application/json" ||
			s.body.Name != "web" || s.body.Values["a"] != "b" {
			t.Errorf("request %d: %+v", i, s)
		}
	}
}

func TestReads(t *testing.T) {
	rels := []*helmrelease.Release{{Name: "web", Namespace: "ns", Version: 2}}
	srv, got := fakeSubmit(t, http.StatusOK, rels)
	c := &Client{Server: srv.URL}
	if l, err := c.List(ctx(t), "ns"); err != nil || len(l) != 1 || l[0].Version != 2 {
		t.Fatalf("List = %v, %v", l, err)
	}
	if h, err := c.History(ctx(t), "ns", "web"); err != nil || len(h) != 1 {
		t.Fatalf("History = %v, %v", h, err)
	}
	for i, want := range []struct{ path, query string }{
		{api.PathList, "limitInfo=true&ns=ns"},
		{api.PathHistory, "name=web&ns=ns"},
	} {
		if s := (*got)[i]; s.method != http.MethodGet || s.path != want.path || s.query != want.query || s.auth != "" {
			t.Errorf("request %d: %+v", i, s)
		}
	}
	one, _ := fakeSubmit(t, http.StatusOK, rels[0])
	if r, err := (&Client{Server: one.URL}).Get(ctx(t), "ns", "web"); err != nil || r.Name != "web" {
		t.Errorf("Get = %v, %v", r, err)
	}
}

func TestErrors(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  int
		answer  any
		message string
	}{
		{"submit's error body", http.StatusConflict, api.Error{Error: "release name is in use"}, "release name is in use (HTTP 409)"},
		{"a proxy's plain text", http.StatusBadGateway, "upstream down\n", "upstream down (HTTP 502)"},
		{"an empty JSON error", http.StatusForbidden, api.Error{}, `{"error":""} (HTTP 403)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv, _ := fakeSubmit(t, tc.status, tc.answer)
			_, err := (&Client{Server: srv.URL}).Install(ctx(t), api.ReleaseRequest{Name: "web"})
			var apiErr *APIError
			if !errors.As(err, &apiErr) || apiErr.Status != tc.status || err.Error() != tc.message {
				t.Errorf("error %v", err)
			}
		})
	}
	srv, _ := fakeSubmit(t, http.StatusOK, "not json")
	if _, err := (&Client{Server: srv.URL}).List(ctx(t), ""); err == nil || !strings.Contains(err.Error(), "decode answer of GET") {
		t.Errorf("undecodable answer: %v", err)
	}
	if _, err := (&Client{Server: "http://127.0.0.1:1"}).List(ctx(t), ""); err == nil || !strings.Contains(err.Error(), "submit at http://127.0.0.1:1") {
		t.Errorf("unreachable submit: %v", err)
	}
}

// Get carries the pending revision's progress beside Helm's fields.
func TestGetWithProgress(t *testing.T) {
	at := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	answer := `{"name":"web","namespace":"ns","version":3,"info":{"status":"pending-upgrade"},` +
		`"progress":{"phase":"waiting","ready":1,"total":2,"waitingFor":["Deployment/web"],"hook":"","warnings":["Pod/web-1: Unhealthy: probe failed"],"updated":"2026-12-02T10:00:00Z"}}`
	srv, got := fakeSubmit(t, http.StatusOK, answer)
	rel, err := (&Client{Server: srv.URL}).Get(ctx(t), "ns", "web")
	if err != nil {
		t.Fatal(err)
	}
	if rel.Name != "web" || rel.Version != 3 || rel.Info.Status != helmrelease.StatusPendingUpgrade {
		t.Errorf("release %+v", rel.Release)
	}
	p := rel.Progress
	if p == nil || p.Phase != "waiting" || p.Ready != 1 || p.Total != 2 || len(p.WaitingFor) != 1 || p.WaitingFor[0] != "Deployment/web" ||
		len(p.Warnings) != 1 || !p.Updated.Equal(at) {
		t.Errorf("progress %+v", p)
	}
	if s := (*got)[0]; s.method != http.MethodGet || s.path != api.PathRelease || s.query != "name=web&ns=ns" {
		t.Errorf("request %+v", s)
	}
	// A final revision has no progress; an answer without a release is an error, not a nil to trip on.
	final, _ := fakeSubmit(t, http.StatusOK, `{"name":"web","version":3,"info":{"status":"deployed"}}`)
	if rel, err := (&Client{Server: final.URL}).Get(ctx(t), "ns", "web"); err != nil || rel.Progress != nil {
		t.Errorf("final: %+v, %v", rel, err)
	}
	empty, _ := fakeSubmit(t, http.StatusOK, `{}`)
	if _, err := (&Client{Server: empty.URL}).Get(ctx(t), "ns", "web"); err == nil {
		t.Error("an empty answer gave no error")
	}
}

func TestCancel(t *testing.T) {
	for _, tc := range []struct {
		code   int
		status string
	}{{http.StatusAccepted, "cancelling"}, {http.StatusOK, "failed"}} {
		srv, got := fakeSubmit(t, tc.code, api.Cancelled{Name: "web", Namespace: "ns", Revision: 3, Status: tc.status})
		out, err := (&Client{Server: srv.URL, Token: "t0k"}).Cancel(ctx(t), "ns", "web")
		if err != nil || out.Status != tc.status || out.Revision != 3 {
			t.Errorf("Cancel (%d) = %+v, %v", tc.code, out, err)
		}
		if s := (*got)[0]; s.method != http.MethodPost || s.path != api.PathCancel || s.query != "name=web&ns=ns" || s.auth != "Bearer t0k" {
			t.Errorf("request %+v", s)
		}
	}
	srv, _ := fakeSubmit(t, http.StatusConflict, api.Error{Error: "nothing to cancel: revision 2 of ns/web is deployed"})
	_, err := (&Client{Server: srv.URL}).Cancel(ctx(t), "ns", "web")
	var apiErr *APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusConflict || !strings.Contains(err.Error(), "nothing to cancel") {
		t.Errorf("cancel of a final revision: %v", err)
	}
}
