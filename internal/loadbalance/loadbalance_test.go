package loadbalance

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// backend is one instance that records the bodies it received.
type backend struct {
	srv    *httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newBackend(t *testing.T, name string, handle func(w http.ResponseWriter, r *http.Request) bool) *backend {
	t.Helper()
	b := &backend{}
	b.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		b.mu.Lock()
		b.bodies = append(b.bodies, string(body))
		b.mu.Unlock()
		if handle != nil && handle(w, r) {
			return
		}
		_, _ = io.WriteString(w, name)
	}))
	t.Cleanup(b.srv.Close)
	return b
}

func (b *backend) received() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.bodies...)
}

func start(t *testing.T, backends ...*backend) *Balancer {
	t.Helper()
	lb, err := Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = lb.Close() })
	for _, b := range backends {
		if err := lb.Add(b.srv.URL); err != nil {
			t.Fatal(err)
		}
	}
	return lb
}

func post(t *testing.T, url, body string) (int, string) {
	t.Helper()
	resp, err := http.Post(url+"/some/path", "text/plain", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestRoundRobinSpreadsRequests(t *testing.T) {
	a, b, c := newBackend(t, "a", nil), newBackend(t, "b", nil), newBackend(t, "c", nil)
	lb := start(t, a, b, c)
	answers := map[string]int{}
	for i := 0; i < 9; i++ {
		code, who := post(t, lb.URL, "event")
		if code != http.StatusOK {
			t.Fatalf("request %d: %d %s", i, code, who)
		}
		answers[who]++
	}
	if answers["a"] != 3 || answers["b"] != 3 || answers["c"] != 3 {
		t.Errorf("answers by instance %v, want 3 each", answers)
	}
	for i, s := range lb.Stats() {
		if s.Served != 3 || s.Refused != 0 {
			t.Errorf("instance %d: %+v", i, s)
		}
	}
}

// A killed instance refuses connections: its share goes to the others, bodies intact.
func TestRefusingInstanceIsSkipped(t *testing.T) {
	a, b := newBackend(t, "a", nil), newBackend(t, "b", nil)
	lb := start(t, a, b)
	b.srv.Close() // nothing listens on its port any more
	for i := 0; i < 6; i++ {
		code, who := post(t, lb.URL, "payload")
		if code != http.StatusOK || who != "a" {
			t.Fatalf("request %d: %d %q, want 200 from a", i, code, who)
		}
	}
	if got := a.received(); len(got) != 6 || got[0] != "payload" || got[5] != "payload" {
		t.Errorf("a received %q", got)
	}
	if st := lb.Stats(); st[1].Refused != 3 || st[0].Served != 6 {
		t.Errorf("stats %+v: want b refused 3 times, a served 6", st)
	}
	if lb.Failed() != 0 {
		t.Errorf("%d requests failed", lb.Failed())
	}
}

// An instance that dies with the request in flight: the request fails (502) and is not sent
// to another instance, which could run it a second time.
func TestInFlightRequestOnDyingInstanceFails(t *testing.T) {
	dying := newBackend(t, "dying", func(w http.ResponseWriter, r *http.Request) bool {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			conn.(*net.TCPConn).SetLinger(0) // a reset, as the kernel answers for a killed process
			conn.Close()
		}
		return true
	})
	other := newBackend(t, "other", nil)
	lb := start(t, dying, other)
	code, _ := post(t, lb.URL, "run helm once")
	if code != http.StatusBadGateway {
		t.Errorf("in-flight request on a dying instance: %d, want 502", code)
	}
	if got := other.received(); len(got) != 0 {
		t.Errorf("the request was sent again to another instance: %q", got)
	}
	if got := dying.received(); len(got) != 1 || got[0] != "run helm once" {
		t.Errorf("dying instance received %q", got)
	}
	if lb.Failed() != 1 {
		t.Errorf("failed %d, want 1", lb.Failed())
	}
}

func TestNoInstanceAnswers503(t *testing.T) {
	lb := start(t)
	if code, _ := post(t, lb.URL, "x"); code != http.StatusServiceUnavailable {
		t.Errorf("no instance: %d, want 503", code)
	}
	gone := newBackend(t, "gone", nil)
	gone.srv.Close()
	if err := lb.Add(gone.srv.URL); err != nil {
		t.Fatal(err)
	}
	if code, _ := post(t, lb.URL, "x"); code != http.StatusServiceUnavailable {
		t.Errorf("every instance refusing: %d, want 503", code)
	}
}

func TestAddRefusesABadAddress(t *testing.T) {
	lb := start(t)
	if err := lb.Add("not a url"); err == nil {
		t.Error("Add accepted an address without a host")
	}
}
