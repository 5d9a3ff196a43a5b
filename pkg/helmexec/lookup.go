package helmexec

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/client-go/rest"
)

// Bounds of a render's `lookup` calls, answered by the parent (LookupServer).
const (
	// MaxLookups bounds the API requests of one render (a lookup is a discovery request
	// and a get or list).
	MaxLookups = 2000
	// MaxLookupBytes bounds one answer of the API server to a lookup.
	MaxLookupBytes = 8 << 20
)

// LookupServer answers one render's `lookup` calls, sent by its worker on a unix socket,
// as the action's identity (its fenced, impersonating REST config): reads only, each answer
// bounded, their number bounded, and the action's wait gate told while the API server
// answers, so the render gives its CPU slot back while it waits.
type LookupServer struct {
	cfg    *rest.Config
	gate   WaitGate
	socket string
	ln     net.Listener
	srv    *http.Server
	count  atomic.Int64

	once   sync.Once
	client *http.Client
	err    error
}

// NewLookupServer serves a render's lookups through cfg; gate may be nil.
func NewLookupServer(cfg *rest.Config, gate WaitGate) (*LookupServer, error) {
	var nonce [12]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("lookup socket: %w", err)
	}
	socket := "/tmp/async-helm-lookup-" + hex.EncodeToString(nonce[:])
	if runtime.GOOS == "linux" { // abstract: nothing on the filesystem to clean up
		socket = "@async-helm-lookup-" + hex.EncodeToString(nonce[:])
	}
	ln, err := net.Listen("unix", socket)
	if err != nil {
		return nil, fmt.Errorf("lookup socket: %w", err)
	}
	s := &LookupServer{cfg: cfg, gate: gate, socket: socket, ln: ln}
	s.srv = &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

// Socket is where the worker dials.
func (s *LookupServer) Socket() string { return s.socket }

// Close stops answering (a request under way fails).
func (s *LookupServer) Close() { _ = s.srv.Close() }

// Count is the API requests answered or refused so far.
func (s *LookupServer) Count() int64 { return s.count.Load() }

func (s *LookupServer) httpClient() (*http.Client, error) {
	s.once.Do(func() {
		rt, err := rest.TransportFor(s.cfg)
		s.client, s.err = &http.Client{Transport: rt}, err
	})
	return s.client, s.err
}

// ServeHTTP sends one read on to the API server and copies its answer back, bounded.
func (s *LookupServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	n := s.count.Add(1)
	switch {
	case r.Method != http.MethodGet:
		http.Error(w, "a template's lookup may only read", http.StatusMethodNotAllowed)
		return
	case !strings.HasPrefix(r.URL.Path, "/api"):
		http.Error(w, "not an API path", http.StatusNotFound)
		return
	case n > MaxLookups:
		http.Error(w, fmt.Sprintf("the chart's templates made more than %d API requests (lookup)", MaxLookups), http.StatusTooManyRequests)
		return
	}
	c, err := s.httpClient()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out, err := http.NewRequestWithContext(r.Context(), http.MethodGet, strings.TrimSuffix(s.cfg.Host, "/")+r.URL.RequestURI(), nil)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	out.Header.Set("Accept", r.Header.Get("Accept"))
	body, status, header, err := s.roundTrip(c, out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	if ct := header.Get("Content-Type"); ct != "" {
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// roundTrip is one request to the API server, the gate told the render waits meanwhile.
func (s *LookupServer) roundTrip(c *http.Client, req *http.Request) ([]byte, int, http.Header, error) {
	if s.gate != nil {
		s.gate.Waiting()
		defer s.gate.Working()
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxLookupBytes+1))
	if err != nil {
		return nil, 0, nil, err
	}
	if len(body) > MaxLookupBytes {
		return nil, 0, nil, fmt.Errorf("a lookup's answer is over %d MiB", MaxLookupBytes>>20)
	}
	return body, resp.StatusCode, resp.Header, nil
}
