package source

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
)

// ErrForbiddenHost is a chart URL that resolves (or redirects) to an address async-helm must
// not fetch from: loopback, link-local (cloud metadata), and private ranges unless allowed.
var ErrForbiddenHost = errors.New("chart URL host is not allowed")

// Policy says which addresses charts may be fetched from.
type Policy struct {
	AllowLoopback bool
	AllowPrivate  bool
	// AllowAddresses are "ip:port" allowed whatever their range (an internal repository).
	AllowAddresses []string
	// MaxRedirects followed (each one checked again); default 5.
	MaxRedirects int
}

var cgnat = mustCIDR("100.64.0.0/10")

func mustCIDR(s string) *net.IPNet {
	_, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	return n
}

// Allowed reports whether ip may be connected to.
func (p Policy) Allowed(ip net.IP) bool {
	switch {
	case ip == nil:
		return false
	case ip.IsLoopback():
		return p.AllowLoopback
	case ip.IsUnspecified(), ip.IsLinkLocalUnicast(), ip.IsLinkLocalMulticast(), ip.IsMulticast(), ip.IsInterfaceLocalMulticast():
		return false // 169.254.169.254 and friends: cloud metadata lives here
	case ip.IsPrivate(), cgnat.Contains(ip):
		return p.AllowPrivate
	}
	return true
}

// HTTPClient checks the address of every connection it dials, after DNS resolution and on
// every redirect; no proxy, which would hide the real destination.
func (p Policy) HTTPClient(timeout time.Duration) *http.Client {
	dialer := &net.Dialer{
		Timeout: bounds.DialTime,
		Control: func(_, address string, _ syscall.RawConn) error {
			host, _, err := net.SplitHostPort(address)
			if err != nil {
				return err
			}
			for _, a := range p.AllowAddresses {
				if a == address {
					return nil
				}
			}
			if ip := net.ParseIP(host); !p.Allowed(ip) {
				return fmt.Errorf("%w: %s", ErrForbiddenHost, host)
			}
			return nil
		},
	}
	max := positiveOr(p.MaxRedirects, 5)
	return &http.Client{
		Timeout: timeout,
		Transport: &http.Transport{
			DialContext:           dialer.DialContext,
			TLSHandshakeTimeout:   bounds.TLSHandshakeTime,
			ResponseHeaderTimeout: bounds.ResponseHeaderTime,
			MaxIdleConnsPerHost:   4,
		},
		CheckRedirect: func(req *http.Request, via []*http.Request) error {
			if len(via) >= max {
				return fmt.Errorf("%w: more than %d redirects", ErrForbiddenHost, max)
			}
			if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
				return fmt.Errorf("%w: redirect to %s", ErrForbiddenHost, req.URL.Scheme)
			}
			return nil
		},
	}
}
