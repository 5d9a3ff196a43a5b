package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httputil"
	"os"
	"strings"
	"time"
)

// runProxy is the HTTP forward proxy of the Knative data plane: the controllers publish
// in-cluster addresses (http://broker-ingress.knative-eventing.svc.cluster.local/<ns>/<broker>,
// http://<channel>-kn-channel.<ns>.svc.cluster.local, http://broker-filter...), and the data
// plane's HTTP clients honour HTTP_PROXY. The proxy sends each such request to the local
// process serving that name and keeps the Host header: the dispatcher routes on it.
// Anything else (and CONNECT, i.e. https) is refused at once.
func runProxy(ctx context.Context, listen string, ports map[string]int) error {
	for name, p := range ports {
		if p == 0 {
			return fmt.Errorf("proxy: -%s port missing", name)
		}
	}
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	transport := &http.Transport{Proxy: nil, MaxIdleConns: 1000, MaxIdleConnsPerHost: 200, IdleConnTimeout: 90 * time.Second,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second}).DialContext}
	rp := &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(r *httputil.ProxyRequest) {
			r.Out.URL.Scheme = "http"
			r.Out.URL.Host = fmt.Sprintf("127.0.0.1:%d", ports[target(r.In.URL.Hostname())])
			r.Out.Host = r.In.Host
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			log.Warn("proxy", "url", r.URL.String(), "err", err)
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodConnect || !r.URL.IsAbs() || !strings.HasSuffix(r.URL.Hostname(), ".svc.cluster.local") {
			http.Error(w, "not a cluster address served here: "+r.Host, http.StatusBadGateway)
			return
		}
		rp.ServeHTTP(w, r)
	})
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return fmt.Errorf("proxy: %w", err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	go func() { <-ctx.Done(); _ = srv.Close() }()
	log.Info("proxy listening", "addr", l.Addr().String(), "ports", ports)
	if err := srv.Serve(l); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// target names the process serving an in-cluster host name.
func target(host string) string {
	switch host {
	case "broker-ingress." + systemNamespace + ".svc.cluster.local":
		return "ingress"
	case "broker-filter." + systemNamespace + ".svc.cluster.local":
		return "filter"
	}
	// <channel>-kn-channel.<ns>.svc.cluster.local and imc-dispatcher.knative-eventing...
	return "dispatcher"
}
