package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// apiRequest is one request a process sent to the API server through a countingProxy.
type apiRequest struct {
	at    time.Time
	verb  string // GET, LIST, WATCH, PATCH, ...
	path  string
	query string
}

// countingProxy stands in front of the API server on loopback (plain HTTP, the bench's own
// credentials forwarded) and records every request a process sends through it: how the
// scale section counts the API calls of one sweeper pass from outside the notifier.
type countingProxy struct {
	srv        *http.Server
	kubeconfig string
	mu         sync.Mutex
	reqs       []apiRequest
}

func startCountingProxy(cfg *rest.Config, dir string) (*countingProxy, error) {
	target, err := url.Parse(cfg.Host)
	if err != nil {
		return nil, err
	}
	tr, err := rest.TransportFor(cfg)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	cp := &countingProxy{kubeconfig: filepath.Join(dir, "proxy-kubeconfig")}
	rp := &httputil.ReverseProxy{
		Rewrite:       func(r *httputil.ProxyRequest) { r.SetURL(target); r.Out.Host = target.Host },
		Transport:     tr,
		FlushInterval: -1, // watches stream
		// A watch or list its client gave up on is not an error worth a line.
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if !errors.Is(err, context.Canceled) {
				fmt.Fprintf(os.Stderr, "api proxy: %s %s: %v\n", r.Method, r.URL.Path, err)
			}
			w.WriteHeader(http.StatusBadGateway)
		},
	}
	cp.srv = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cp.record(r)
		rp.ServeHTTP(w, r)
	})}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["proxy"] = &clientcmdapi.Cluster{Server: "http://" + ln.Addr().String()}
	kc.AuthInfos["proxy"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["proxy"] = &clientcmdapi.Context{Cluster: "proxy", AuthInfo: "proxy"}
	kc.CurrentContext = "proxy"
	if err := clientcmd.WriteToFile(*kc, cp.kubeconfig); err != nil {
		ln.Close()
		return nil, err
	}
	go func() { _ = cp.srv.Serve(ln) }()
	return cp, nil
}

func (cp *countingProxy) record(r *http.Request) {
	verb := r.Method
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodGet && q.Get("watch") == "true":
		verb = "WATCH"
	case r.Method == http.MethodGet && isCollection(r.URL.Path):
		verb = "LIST"
	}
	cp.mu.Lock()
	cp.reqs = append(cp.reqs, apiRequest{at: time.Now(), verb: verb, path: r.URL.Path, query: r.URL.RawQuery})
	cp.mu.Unlock()
}

// isCollection says whether an API path names a collection (…/secrets) rather than one
// object (…/secrets/name): a GET of a collection is a list.
func isCollection(path string) bool {
	parts := strings.Split(strings.Trim(path, "/"), "/")
	// api/v1/<res>, api/v1/namespaces/<ns>/<res>, apis/<g>/<v>/<res>, apis/<g>/<v>/namespaces/<ns>/<res>
	if len(parts) > 0 && parts[0] == "apis" && len(parts) > 1 {
		parts = parts[1:]
	}
	switch len(parts) {
	case 3:
		return true
	case 5:
		return parts[2] == "namespaces"
	}
	return false
}

// since returns the requests recorded at or after t.
func (cp *countingProxy) since(t time.Time) []apiRequest {
	cp.mu.Lock()
	defer cp.mu.Unlock()
	var out []apiRequest
	for _, r := range cp.reqs {
		if !r.at.Before(t) {
			out = append(out, r)
		}
	}
	return out
}

func (cp *countingProxy) close() {
	_ = cp.srv.Close()
	_ = os.Remove(cp.kubeconfig)
}
