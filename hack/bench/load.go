package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/async-helm/async-helm/pkg/api"
)

// sample is one request: how long it took and whether it got what it wanted. Failed
// requests stay in the percentiles (with the time they took): dropping them would make a
// struggling server look fast.
type sample struct {
	d   time.Duration
	err error
}

// result summarizes samples.
type result struct {
	p50, p99 time.Duration
	rate     float64 // successful requests per second of wall time
	ok, n    int
	firstErr error
	busiest  string // what used the machine's CPU meanwhile (closed-loop rounds)
}

func summarize(s []sample, wall time.Duration) result {
	ds := make([]time.Duration, 0, len(s))
	r := result{n: len(s)}
	for _, x := range s {
		ds = append(ds, x.d)
		if x.err == nil {
			r.ok++
		} else if r.firstErr == nil {
			r.firstErr = x.err
		}
	}
	r.p50, r.p99 = percentile(ds, 0.5), percentile(ds, 0.99)
	if wall > 0 {
		r.rate = float64(r.ok) / wall.Seconds()
	}
	return r
}

// note says how many of the requests failed, and the first error.
func (r result) note() string {
	if r.ok == r.n {
		return fmt.Sprintf("n=%d", r.n)
	}
	return fmt.Sprintf("n=%d, %d FAILED, first: %v", r.n, r.n-r.ok, r.firstErr)
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[int(float64(len(s)-1)*p+0.5)]
}

// closedLoop runs fn(0..n-1) from `clients` goroutines, each sending its next request
// when the last one is answered.
func closedLoop(n, clients int, fn func(i int) error) result {
	return summarize(closedLoopSamples(0, n, clients, fn))
}

// rounds is one side's closed loop: summarized over all its rounds, and round by round.
type rounds struct {
	all    result
	rounds []result
}

// closedLoopRounds runs the closed loops of fns in rounds, the order rotated each round
// (a b c, b c a, ...), and summarizes each over its rounds and round by round: a cluster
// whose load drifts during the run (namespaces of an earlier run still being deleted, etcd
// compacting) then weighs on every side alike, not on whichever ran last.
func closedLoopRounds(n, clients, nRounds int, fns ...func(i int) error) []rounds {
	samples := make([][]sample, len(fns))
	walls := make([]time.Duration, len(fns))
	out := make([]rounds, len(fns))
	per := n / nRounds
	for r := 0; r < nRounds; r++ {
		for k := range fns {
			j := (r + k) % len(fns)
			p0 := snapshotProcs("/proc")
			s, w := closedLoopSamples(r*per, per, clients, fns[j])
			samples[j], walls[j] = append(samples[j], s...), walls[j]+w
			res := summarize(s, w)
			res.busiest = busiest(p0, snapshotProcs("/proc"), 6)
			out[j].rounds = append(out[j].rounds, res)
		}
	}
	for j := range fns {
		out[j].all = summarize(samples[j], walls[j])
	}
	return out
}

// repeatedOf pairs the rounds of a side with its floor's, by metric.
func repeatedOf(side, floor rounds, metric func(result) float64) *repeated {
	r := &repeated{}
	for i := range side.rounds {
		if i < len(floor.rounds) {
			r.add(metric(side.rounds[i]), metric(floor.rounds[i]))
		}
	}
	return r
}

func p99ms(r result) float64  { return float64(r.p99.Microseconds()) / 1000 }
func p50ms(r result) float64  { return float64(r.p50.Microseconds()) / 1000 }
func rateOf(r result) float64 { return r.rate }

// closedLoopSamples is closedLoop of fn(from..from+n-1), with its samples and wall time.
func closedLoopSamples(from, n, clients int, fn func(i int) error) ([]sample, time.Duration) {
	out := make([]sample, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	t0 := time.Now()
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				s := time.Now()
				err := fn(from + i)
				out[i] = sample{time.Since(s), err}
			}
		}()
	}
	wg.Wait()
	return out, time.Since(t0)
}

// openLoop sends at a fixed rate for d, whatever the answers; each request's latency is
// counted from the time it was scheduled to be sent, so a server that falls behind shows
// its queue (no coordinated omission). At most maxInFlight are outstanding; a request that
// would exceed it waits, and that wait counts.
func openLoop(ctx context.Context, rate int, d time.Duration, maxInFlight int, fn func(i int) error) result {
	n := int(float64(rate) * d.Seconds())
	out := make([]sample, n)
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	t0 := time.Now()
	interval := time.Second / time.Duration(rate)
	for i := 0; i < n; i++ {
		at := t0.Add(time.Duration(i) * interval)
		if w := time.Until(at); w > 0 {
			select {
			case <-time.After(w):
			case <-ctx.Done():
				// Stopped early (a probe ends with what it measures): the requests in
				// flight are waited for, so no sample is left empty.
				wg.Wait()
				return summarize(out[:i], time.Since(t0))
			}
		}
		sem <- struct{}{}
		wg.Add(1)
		go func(i int, at time.Time) {
			defer wg.Done()
			err := fn(i)
			out[i] = sample{time.Since(at), err}
			<-sem
		}(i, at)
	}
	wg.Wait()
	return summarize(out, time.Since(t0))
}

// parallel runs fn(0..n-1) on workers goroutines and returns the first error.
func parallel(n, workers int, fn func(i int) error) error {
	var next atomic.Int64
	var first atomic.Value
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for first.Load() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					first.CompareAndSwap(nil, err)
				}
			}
		}()
	}
	wg.Wait()
	if err, _ := first.Load().(error); err != nil {
		return err
	}
	return nil
}

// submitClient posts installs to submit as one caller.
type submitClient struct {
	url, token string
	http       *http.Client
	// dials counts the connections opened: a pool smaller than the requests in flight
	// closes and opens one per request, a cost the raw creates' HTTP/2 never pays.
	dials atomic.Int64
}

// newSubmitClient keeps up to conns idle connections: size it to the most requests the
// caller has in flight.
func newSubmitClient(url, token string, conns int) *submitClient {
	c := &submitClient{url: url, token: token}
	dialer := &net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}
	c.http = &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{
		MaxIdleConns: conns, MaxIdleConnsPerHost: conns, IdleConnTimeout: time.Minute,
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c.dials.Add(1)
			return dialer.DialContext(ctx, network, addr)
		}}}
	return c
}

// connsOpened is how many connections the client opened since the last call.
func (c *submitClient) connsOpened() int64 { return c.dials.Swap(0) }

// install posts one install and expects 201.
func (c *submitClient) install(ctx context.Context, req api.ReleaseRequest) error {
	body, err := json.Marshal(req)
	if err != nil {
		return err
	}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+api.PathAsync, bytes.NewReader(body))
	if err != nil {
		return err
	}
	r.Header.Set("Authorization", "Bearer "+c.token)
	r.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusCreated {
		var e api.Error
		_ = json.NewDecoder(resp.Body).Decode(&e)
		return fmt.Errorf("%d %s", resp.StatusCode, e.Error)
	}
	_, _ = bytes.NewBuffer(nil).ReadFrom(resp.Body)
	return nil
}

// get fetches a path and discards the body, expecting 200.
func (c *submitClient) get(ctx context.Context, path string) error {
	r, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+path, nil)
	if err != nil {
		return err
	}
	r.Header.Set("Authorization", "Bearer "+c.token)
	resp, err := c.http.Do(r)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	n, _ := bytes.NewBuffer(nil).ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %d (%d bytes)", path, resp.StatusCode, n)
	}
	return nil
}

// procMem reads VmRSS and VmHWM (peak) of a process, in bytes.
func procMem(pid int) (rss, hwm int64) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) >= 2 {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			switch f[0] {
			case "VmRSS:":
				rss = v << 10
			case "VmHWM:":
				hwm = v << 10
			}
		}
	}
	return rss, hwm
}

func joinInts(v []int) string {
	s := make([]string, len(v))
	for i, x := range v {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ",")
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		v, err := strconv.Atoi(f)
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, v)
	}
	return out, nil
}

// cpuTimes are the machine's busy and total CPU time so far (/proc/stat, in ticks).
type cpuTimes struct{ busy, total uint64 }

func readCPUTimes() cpuTimes {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuTimes{}
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	var t cpuTimes
	for i, s := range f[1:] {
		v, _ := strconv.ParseUint(s, 10, 64)
		t.total += v
		if i != 3 && i != 4 { // idle, iowait
			t.busy += v
		}
	}
	return t
}

// busySince is the share of the machine's CPU (all cores) that was busy since start.
func busySince(start cpuTimes) float64 {
	now := readCPUTimes()
	if now.total <= start.total {
		return 0
	}
	return float64(now.busy-start.busy) / float64(now.total-start.total)
}
