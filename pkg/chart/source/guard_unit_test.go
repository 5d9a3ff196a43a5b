package source

import (
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestPolicyAllowed(t *testing.T) {
	open := Policy{AllowLoopback: true, AllowPrivate: true}
	for _, tc := range []struct {
		ip             string
		closed, opened bool
	}{
		{"127.0.0.1", false, true},
		{"::1", false, true},
		{"10.0.0.1", false, true},
		{"172.16.5.4", false, true},
		{"192.168.1.1", false, true},
		{"fd00::1", false, true},
		{"100.64.0.1", false, true}, // carrier-grade NAT
		{"169.254.169.254", false, false},
		{"fe80::1", false, false},
		{"0.0.0.0", false, false},
		{"::", false, false},
		{"224.0.0.1", false, false},
		{"ff02::1", false, false},
		{"8.8.8.8", true, true},
		{"2001:4860:4860::8888", true, true},
		{"100.128.0.1", true, true}, // just outside 100.64.0.0/10
	} {
		ip := net.ParseIP(tc.ip)
		if got := (Policy{}).Allowed(ip); got != tc.closed {
			t.Errorf("default policy, %s: %v", tc.ip, got)
		}
		if got := open.Allowed(ip); got != tc.opened {
			t.Errorf("loopback and private allowed, %s: %v", tc.ip, got)
		}
	}
	if (Policy{AllowLoopback: true, AllowPrivate: true}).Allowed(nil) {
		t.Error("an unparsable address was allowed")
	}
}

// The client checks each connection's address: a loopback server is refused unless the
// policy allows loopback or that exact address.
func TestHTTPClientChecksEveryConnection(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hop" {
			http.Redirect(w, r, "/chart.tgz", http.StatusFound)
			return
		}
		_, _ = w.Write([]byte("chart"))
	}))
	defer srv.Close()
	addr := strings.TrimPrefix(srv.URL, "http://")
	get := func(p Policy, path string) error {
		resp, err := p.HTTPClient(5 * time.Second).Get(srv.URL + path)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	if err := get(Policy{}, "/chart.tgz"); !errors.Is(err, ErrForbiddenHost) {
		t.Errorf("loopback with the default policy: %v", err)
	}
	if err := get(Policy{AllowLoopback: true}, "/hop"); err != nil {
		t.Errorf("loopback allowed: %v", err)
	}
	if err := get(Policy{AllowAddresses: []string{addr}}, "/chart.tgz"); err != nil {
		t.Errorf("the allowed address: %v", err)
	}
	if err := get(Policy{AllowAddresses: []string{"127.0.0.1:1"}}, "/chart.tgz"); !errors.Is(err, ErrForbiddenHost) {
		t.Errorf("another allowed address opened this one: %v", err)
	}
}

func TestHTTPClientRedirects(t *testing.T) {
	hops := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/file":
			http.Redirect(w, r, "file:///etc/passwd", http.StatusFound)
		default:
			hops++
			http.Redirect(w, r, "/loop", http.StatusFound)
		}
	}))
	defer srv.Close()
	c := Policy{AllowLoopback: true, MaxRedirects: 3}.HTTPClient(5 * time.Second)
	if _, err := c.Get(srv.URL + "/loop"); !errors.Is(err, ErrForbiddenHost) || !strings.Contains(err.Error(), "more than 3 redirects") {
		t.Errorf("redirect loop: %v", err)
	}
	if hops != 3 {
		t.Errorf("%d hops followed, want 3", hops)
	}
	if _, err := c.Get(srv.URL + "/file"); !errors.Is(err, ErrForbiddenHost) {
		t.Errorf("redirect to file://: %v", err)
	}
}
