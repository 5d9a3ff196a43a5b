package helmexec

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
)

// fakeAPI is an API server for workers' lookups: discovery of v1 Secrets, and any Secret
// asked, answered at once unless its path is held (hold), then once it is let go (open).
type fakeAPI struct {
	srv *httptest.Server
	// arrived gets the path of each held request as it reaches the server.
	arrived chan string

	mu      sync.Mutex
	reached []string // "<impersonated user> <path>" of each Secret asked
	held    map[string]chan struct{}
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	a := &fakeAPI{arrived: make(chan string, 16), held: map[string]chan struct{}{}}
	a.srv = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(func() {
		a.mu.Lock()
		for p, c := range a.held {
			close(c)
			delete(a.held, p)
		}
		a.mu.Unlock()
		a.srv.Close()
	})
	return a
}

// as is a REST config of the fake server impersonating user.
func (a *fakeAPI) as(user string) *rest.Config {
	return &rest.Config{Host: a.srv.URL, Impersonate: rest.ImpersonationConfig{UserName: user}}
}

func (a *fakeAPI) hold(p string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.held[p] = make(chan struct{})
}

func (a *fakeAPI) open(p string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if c, ok := a.held[p]; ok {
		close(c)
		delete(a.held, p)
	}
}

func (a *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path == "/api/v1" {
		_, _ = io.WriteString(w, `{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"v1","resources":[`+
			`{"name":"secrets","singularName":"secret","namespaced":true,"kind":"Secret","verbs":["get","list"]}]}`)
		return
	}
	a.mu.Lock()
	a.reached = append(a.reached, r.Header.Get("Impersonate-User")+" "+r.URL.Path)
	held := a.held[r.URL.Path]
	a.mu.Unlock()
	if held != nil {
		a.arrived <- r.URL.Path
		<-held
	}
	ns := path.Base(path.Dir(path.Dir(r.URL.Path)))
	_, _ = fmt.Fprintf(w, `{"kind":"Secret","apiVersion":"v1","metadata":{"name":%q,"namespace":%q}}`, path.Base(r.URL.Path), ns)
}

func (a *fakeAPI) reachedPaths() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.reached...)
}

// secretPath is the API path of Secret name in namespace ns.
func secretPath(ns, name string) string { return "/api/v1/namespaces/" + ns + "/secrets/" + name }

// lookupTemplate is a chart whose template looks Secret name up in ns and writes its name.
func lookupTemplate(ns, name string) GuardRender {
	return oneTemplate(fmt.Sprintf(`name: {{ (lookup "v1" "Secret" %q %q).metadata.name }}`, ns, name))
}

// listeningUnixSockets are the unix sockets the processes pids listen on, as they are
// named in /proc/net/unix ("@..." for an abstract one).
func listeningUnixSockets(t *testing.T, pids ...int) []string {
	t.Helper()
	inodes := map[string]bool{}
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd"
		fds, err := os.ReadDir(dir)
		if err != nil {
			t.Fatalf("list the sockets of %d: %v", pid, err)
		}
		for _, fd := range fds {
			if l, err := os.Readlink(dir + "/" + fd.Name()); err == nil && strings.HasPrefix(l, "socket:[") {
				inodes[strings.TrimSuffix(strings.TrimPrefix(l, "socket:["), "]")] = true
			}
		}
	}
	f, err := os.Open("/proc/net/unix")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// Num RefCount Protocol Flags Type St Inode Path; flag 00010000 is listening.
		fields := strings.Fields(sc.Text())
		if len(fields) == 8 && fields[3] == "00010000" && inodes[fields[6]] {
			out = append(out, fields[7])
		}
	}
	return out
}

// getThrough asks p of the API through the unix socket name, as any process in the pod
// could: the status, or an error when nothing answers.
func getThrough(name, p string) (int, error) {
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, "unix", name)
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second) // a hang guard, not a bound under test
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://lookup"+p, nil)
	if err != nil {
		return 0, err
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// A worker's lookups are answered as its job's identity, and to nobody else: while a
// render waits on its lookup, no unix socket of this process or of the worker answers
// another process's request as that identity.
func TestOnlyTheJobsWorkerGetsLookupAnswers(t *testing.T) {
	api := newFakeAPI(t)
	const who = "system:serviceaccount:tenant-b:deployer"
	db, other := secretPath("tenant-b", "db"), secretPath("tenant-b", "other")
	api.hold(db)
	pids := make(chan int, 1)
	p := &RenderPool{started: func(pid int) { pids <- pid }}
	t.Cleanup(p.Close)
	type result struct {
		files map[string]string
		err   error
	}
	done := make(chan result, 1)
	go func() {
		files, _, err := p.Render(context.Background(), PoolRender{Job: lookupTemplate("tenant-b", "db"), Lookup: NewLookups(api.as(who))})
		done <- result{files, err}
	}()
	<-api.arrived // the render waits on its lookup
	sockets := listeningUnixSockets(t, os.Getpid(), <-pids)
	for _, s := range sockets {
		if status, err := getThrough(s, other); err == nil {
			t.Errorf("another process asked %s through %s: status %d", other, s, status)
		}
	}
	api.open(db)
	r := <-done
	if r.err != nil || r.files["hostile/templates/cm.yaml"] != "name: db" {
		t.Fatalf("render with a lookup: %v %v, want name: db", r.files, r.err)
	}
	if got, want := strings.Join(api.reachedPaths(), ","), who+" "+db; got != want {
		t.Errorf("the API server was asked %q, want only the job's lookup %q", got, want)
	}
	t.Logf("%d listening unix sockets of this process and the worker tried", len(sockets))
}
