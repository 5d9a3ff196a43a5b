package e2e

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/async-helm/async-helm/pkg/api"
)

// A burst of 100 installs over two namespaces through an executor with two slots: the
// release accepted last is `queued` with a position that goes down as the revisions
// accepted before it start, in GET, in oc-helm's status, list and status --watch, and,
// once its namespace's revisions have started for a while, with the expected start in GET,
// status and list; then it runs and is deployed. The notifier's /metrics show each
// namespace's queue and the age of its oldest revision.
func TestBurstShowsQueuePositions(t *testing.T) {
	t.Parallel()
	ns1, ns2 := cluster.Namespace(t), cluster.Namespace(t)
	s := newStackEnv(t, stackEnv{Executor: map[string]string{"MAX_PARALLEL": "2"}}, ns1, ns2)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	const burst = 100
	install := func(ns, name string) {
		if _, err := s.client.Install(ctx, api.ReleaseRequest{Name: name, Namespace: ns, ChartURL: s.charts.ChartURL("tiny", "0.1.0")}); err != nil {
			t.Errorf("install %s/%s: %v", ns, name, err)
		}
	}
	start := time.Now()
	var wg sync.WaitGroup
	names := make(chan int)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range names {
				install([]string{ns1, ns2}[i%2], fmt.Sprintf("q-%03d", i))
			}
		}()
	}
	for i := 0; i < burst-1; i++ {
		names <- i
	}
	close(names)
	wg.Wait()
	install(ns2, "watched")
	t.Logf("%d installs accepted in %s", burst, time.Since(start).Round(time.Millisecond))
	if t.Failed() {
		t.FailNow()
	}
	watch := s.ocHelmStartFor(t, 15*time.Minute, "-n", ns2, "status", "watched", "--watch")

	// Within the second of its acceptance a revision accepted in the same second may sort
	// ahead of it (ties go by name); after that, its position only goes down.
	time.Sleep(2 * time.Second)
	positions, cliSeen := s.queuePositions(t, ctx, ns1, ns2)
	t.Logf("positions of ns2/watched seen by GET: %v", positions)
	if len(positions) < 3 || positions[0] <= positions[len(positions)-1] {
		t.Errorf("positions %v: want at least 3 readings going down", positions)
	}
	for i := 1; i < len(positions); i++ {
		if positions[i] > positions[i-1] {
			t.Errorf("position went up: %v", positions)
			break
		}
	}
	if !cliSeen.queue {
		t.Error("oc helm status and list never showed the queue")
	}
	if !cliSeen.expected || !cliSeen.apiExpected {
		t.Errorf("the expected start was never shown (GET %t; oc helm status and list %t)", cliSeen.apiExpected, cliSeen.expected)
	}
	out, code := watch()
	t.Logf("oc helm status --watch:\n%s", out)
	if code != 0 || !strings.Contains(out, "watched: deployed, revision 1") {
		t.Errorf("status --watch: exit %d", code)
	}
	lines := regexp.MustCompile(`queued, position (\d+) of \d+`).FindAllStringSubmatch(out, -1)
	if len(lines) < 2 {
		t.Errorf("status --watch printed %d queued lines, want several", len(lines))
	}
	for i := 1; i < len(lines); i++ {
		a, _ := strconv.Atoi(lines[i-1][1])
		b, _ := strconv.Atoi(lines[i][1])
		if b > a {
			t.Errorf("status --watch: position went up from %d to %d", a, b)
		}
	}
}

// queueSeen is what showed the watched release's queue: oc-helm's status and list, with
// the expected start; GET's expected start.
type queueSeen struct{ queue, expected, apiExpected bool }

// queuePositions reads the watched release's queue until an executor starts it: the
// positions GET answered (each change once), and what showed the queue and its expected
// start; on the way it checks the notifier's queue metrics once.
func (s *stack) queuePositions(t *testing.T, ctx context.Context, ns1, ns2 string) ([]int, queueSeen) {
	t.Helper()
	var positions []int
	var seen queueSeen
	metricsSeen := false
	listed := regexp.MustCompile(`watched\s.*pending-install \(queued \d+/\d+, `)
	listedStart := regexp.MustCompile(`watched\s.*pending-install \(queued \d+/\d+, [^,]*, start ~\d{4}-`)
	for ctx.Err() == nil {
		rel := s.getRelease(t, ns2, "watched")
		if rel.Queue == nil {
			break
		}
		if n := len(positions); n == 0 || positions[n-1] != rel.Queue.Position {
			positions = append(positions, rel.Queue.Position)
		}
		seen.apiExpected = seen.apiExpected || rel.Queue.ExpectedStart != nil
		if !seen.expected && (!seen.queue || rel.Queue.ExpectedStart != nil) {
			status, _ := s.ocHelm(t, "-n", ns2, "status", "watched")
			list, _ := s.ocHelm(t, "-n", ns2, "list")
			seen.queue = seen.queue || strings.Contains(status, "QUEUED: position ") && listed.MatchString(list)
			seen.expected = strings.Contains(status, ", expected to start at ") && listedStart.MatchString(list)
			t.Logf("oc helm status:\n%s", status)
			t.Logf("oc helm list (first lines):\n%s", head(list, 4))
		}
		if !metricsSeen {
			metricsSeen = s.checkQueueMetrics(t, ns1, ns2)
		}
		time.Sleep(time.Second)
	}
	if !metricsSeen {
		t.Error("submit's metrics never showed both namespaces' queues")
	}
	return positions, seen
}

// checkQueueMetrics reports whether submit (from its ledger) shows a queue in both
// namespaces, with an oldest age.
func (s *stack) checkQueueMetrics(t *testing.T, ns1, ns2 string) bool {
	m := metrics(t, s.submit.URL)
	var found []string
	for _, ns := range []string{ns1, ns2} {
		for _, name := range []string{"asynchelm_queue_revisions", "asynchelm_queue_oldest_age_seconds"} {
			if l := regexp.MustCompile(name + `\{namespace="` + ns + `"\} (\d+(\.\d+)?(e\+\d+)?)`).FindString(m); l != "" {
				found = append(found, l)
			}
		}
	}
	if len(found) == 4 {
		t.Logf("submit's metrics:\n%s", strings.Join(found, "\n"))
	}
	return len(found) == 4
}

func head(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "\n")
}
