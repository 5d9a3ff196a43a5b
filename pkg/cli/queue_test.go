package cli

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/progress"
)

var queueAccepted = time.Date(2026, 12, 2, 9, 58, 0, 0, time.UTC)

// queuedStep is a pending revision no executor has started, at position of total.
func queuedStep(position, total int, age int64) *api.Release {
	r := step(helmrelease.StatusPendingInstall, "", nil)
	start := queueAccepted.Add(5 * time.Minute)
	r.Queue = &api.Queue{State: api.QueueStateQueued, Position: position, Total: total, AcceptedAt: queueAccepted, AgeSeconds: age,
		ExpectedStart: &start}
	return r
}

// Following a queued release prints its position as it goes down (a line per change, not
// per poll: the age is left out), then the action's progress, then the end.
func TestFollowShowsTheQueue(t *testing.T) {
	pi := helmrelease.StatusPendingInstall
	s := &scripted{steps: []*api.Release{
		queuedStep(312, 1200, 2), queuedStep(312, 1200, 4), queuedStep(140, 1100, 6), queuedStep(1, 900, 8),
		step(pi, "", prog(progress.PhaseFetching, 0, 0, "", nil)),
		step(pi, "", prog(progress.PhaseWaiting, 0, 1, "", []string{"Deployment/web"})),
		step(helmrelease.StatusDeployed, "Install complete", nil),
	}}
	var out bytes.Buffer
	if err := runCmd(t, s.serve(t), &out, "status", "web", "--watch"); err != nil {
		t.Fatal(err)
	}
	assertGolden(t, out.Bytes(), filepath.Join("testdata", "follow-queued.txt"))
	line := barLine("web", queuedStep(312, 1200, 130), 3*time.Second, '⠋')
	if !strings.Contains(line, "pending-install, revision 1  3s  queued 312/1200, 2m10s") {
		t.Errorf("bar line of a queued release: %q", line)
	}
}

// status of a queued release says so (table: a QUEUED line; json: the queue field).
func TestStatusShowsTheQueue(t *testing.T) {
	for _, tc := range []struct{ golden, format string }{{"status-queued.txt", "table"}, {"status-queued.json", "json"}} {
		t.Run(tc.golden, func(t *testing.T) {
			s := &scripted{steps: []*api.Release{queuedStep(312, 1200, 130)}}
			var out bytes.Buffer
			if err := runCmd(t, s.serve(t), &out, "status", "web", "-o", tc.format); err != nil {
				t.Fatal(err)
			}
			assertGolden(t, out.Bytes(), filepath.Join("testdata", tc.golden))
		})
	}
}

// list shows the queue beside the status of queued rows only; json keeps Helm's fields and
// adds queue to those rows.
func TestListShowsTheQueue(t *testing.T) {
	deployed := step(helmrelease.StatusDeployed, "Install complete", nil).Release
	deployed.Name = "api"
	rows := []api.Release{{Release: deployed}, *queuedStep(312, 1200, 130)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+api.PathList, func(w http.ResponseWriter, r *http.Request) { _ = json.NewEncoder(w).Encode(rows) })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	for _, tc := range []struct{ golden, format string }{{"list-queued.txt", "table"}, {"list-queued.json", "json"}} {
		t.Run(tc.golden, func(t *testing.T) {
			var out bytes.Buffer
			if err := runCmd(t, srv, &out, "list", "-o", tc.format); err != nil {
				t.Fatal(err)
			}
			assertGolden(t, out.Bytes(), filepath.Join("testdata", tc.golden))
		})
	}
}
