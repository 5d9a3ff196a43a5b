package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/async-helm/async-helm/pkg/api"
)

// fakeLogs answers the log route: web's ended log; run's log grows by one line per read
// and ends at the third; the rest 404 (or 403 for ns secret).
func fakeLogs(t *testing.T) *httptest.Server {
	t0 := time.Date(2026, 12, 3, 23, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	last := at(40)
	ended := []api.LogLine{
		{Seq: 3, Time: at(0), Text: "creating 1 resource(s)"},
		{Seq: 4, Time: at(0), Text: "beginning wait for 1 resources with timeout of 30s"},
		{Seq: 5, Time: at(2), Text: "Deployment is not ready: team/web. 0 out of 1 expected pods are ready", Repeated: 14, Last: &last},
		{Seq: 6, Time: at(41), Text: "Error: context deadline exceeded"},
	}
	var reads, queuedReads atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.PathLog, func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		out := api.ActionLog{Namespace: q.Get("ns"), Name: q.Get("name"), Revision: 2, RequestID: "r2", Action: "upgrade", Started: t0, Updated: at(41)}
		switch {
		case q.Get("ns") == "secret":
			w.WriteHeader(http.StatusForbidden)
			_ = json.NewEncoder(w).Encode(api.Error{Error: `forbidden: user "dev" cannot list secrets in namespace "secret"`})
			return
		case q.Get("name") == "web" && (q.Get("version") == "" || q.Get("version") == "2"):
			out.Dropped, out.Lines = 2, ended
		case q.Get("name") == "queued" && queuedReads.Add(1) > 2: // no log while it queues
			out.Lines = ended[3:]
		case q.Get("name") == "run":
			n := int(reads.Add(1))
			out.Running = n < 3
			for _, l := range ended[:n+1] {
				if after := q.Get("after"); after == "" || l.Seq > int64(atoi(after)) {
					out.Lines = append(out.Lines, l)
				}
			}
		default:
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(api.Error{Error: "not found: no log of " + q.Get("ns") + "/" + q.Get("name")})
			return
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("GET "+api.PathRelease, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Query().Get("name") == "queued" {
			_ = json.NewEncoder(w).Encode(&helmrelease.Release{Name: "queued", Namespace: "team", Version: 1,
				Info: &helmrelease.Info{Status: helmrelease.StatusPendingInstall}})
			return
		}
		w.WriteHeader(http.StatusNotFound)
		_ = json.NewEncoder(w).Encode(api.Error{Error: "release: not found"})
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func TestLogs(t *testing.T) {
	srv := fakeLogs(t)
	for _, tt := range []struct {
		name, cmd, golden string
		wantErr           bool
	}{
		{"plain", "logs web", "logs.txt", false},
		{"revision", "logs web --revision 2", "logs.txt", false},
		{"json", "logs web -o json", "logs.json", false},
		{"follow", "logs run -f", "logs-follow.txt", false},
		{"none", "logs ghost --revision 3", "logs-missing.txt", true},
		{"follow a queued revision", "logs queued -f", "logs-follow-queued.txt", false},
		{"forbidden", "logs web -n secret", "logs-forbidden.txt", true},
		{"follow json", "logs web -f -o json", "logs-follow-json.txt", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			g := &Globals{IO: genericiooptions.IOStreams{In: strings.NewReader(""), Out: &out, ErrOut: &out}, PollInterval: time.Millisecond}
			root := newRootCmd(g)
			args := append(strings.Fields(tt.cmd), "--server", srv.URL, "--kubeconfig", os.DevNull)
			if !strings.Contains(tt.cmd, "-n ") {
				args = append(args, "-n", "team")
			}
			root.SetArgs(args)
			err := root.Execute()
			if (err != nil) != tt.wantErr {
				t.Fatalf("error %v, wantErr %v", err, tt.wantErr)
			}
			if err != nil {
				out.WriteString("Error: " + err.Error() + "\n")
			}
			assertGolden(t, out.Bytes(), filepath.Join("testdata", tt.golden))
		})
	}
}
