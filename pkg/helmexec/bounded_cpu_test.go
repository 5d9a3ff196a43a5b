package helmexec

import (
	"context"
	"errors"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
)

// fakeMeter is a thread meter whose CPU time the test sets.
type fakeMeter struct {
	mu       sync.Mutex
	cpu      time.Duration
	readable bool
}

func (m *fakeMeter) CPU() (time.Duration, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.cpu, m.readable
}

func (m *fakeMeter) set(d time.Duration) {
	m.mu.Lock()
	m.cpu = d
	m.mu.Unlock()
}

func (*fakeMeter) release() {}

// fakeTimers hands runBounded timers the test fires, and records what each was set to.
type fakeTimers struct {
	set chan time.Duration
	c   chan time.Time
}

func (f *fakeTimers) after(d time.Duration) <-chan time.Time {
	f.set <- d
	return f.c
}

// The render bound is the CPU time of Helm's goroutine: the wall clock only says when to
// look, and a render that used less than its bound is given the rest.
func TestRenderBoundCountsCPUTime(t *testing.T) {
	const bound = 50 * time.Millisecond
	for _, tc := range []struct {
		name     string
		readable bool
		rendered bool
		cpu      []time.Duration // the CPU used at each timer that fires
		wantSets []time.Duration // the timers asked for, in order
		wantErr  bool
	}{
		{name: "a render that waited gets the rest of its bound", readable: true,
			cpu: []time.Duration{10 * time.Millisecond}, wantSets: []time.Duration{bound, 40 * time.Millisecond}},
		{name: "the rest is never shorter than the minimum check", readable: true,
			cpu: []time.Duration{49 * time.Millisecond}, wantSets: []time.Duration{bound, minRenderCheck}},
		{name: "a render past its CPU bound fails", readable: true,
			cpu: []time.Duration{10 * time.Millisecond, 50 * time.Millisecond}, wantSets: []time.Duration{bound, 40 * time.Millisecond}, wantErr: true},
		{name: "without a CPU clock the bound is wall time", readable: false,
			cpu: []time.Duration{0}, wantSets: []time.Duration{bound}, wantErr: true},
		{name: "a rendered action is no longer bound", readable: true, rendered: true,
			cpu: []time.Duration{time.Minute}, wantSets: []time.Duration{bound}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			meter := &fakeMeter{readable: tc.readable}
			timers := &fakeTimers{set: make(chan time.Duration, 8), c: make(chan time.Time)}
			fence := &Fence{Orphans: &Orphans{}}
			started, release, returned := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			o := runOptions{fence: fence, renderTimeout: bound, after: timers.after,
				lock: func() threadMeter { return meter }}
			go func() {
				_, err := runBounded(context.Background(), o, func() (*helmrelease.Release, error) {
					if tc.rendered {
						fence.markRendered()
					}
					close(started)
					<-release
					return &helmrelease.Release{}, nil
				})
				returned <- err
			}()
			<-started // Helm's goroutine runs: its meter is there to be read
			var sets []time.Duration
			sets = append(sets, <-timers.set)
			for _, used := range tc.cpu {
				meter.set(used)
				timers.c <- time.Time{}
				if len(sets) < len(tc.wantSets) {
					sets = append(sets, <-timers.set)
				}
			}
			if tc.wantErr {
				if err := <-returned; !errors.Is(err, ErrRenderTimeout) || !fence.Ended() {
					t.Fatalf("runBounded = %v (fence ended %v), want ErrRenderTimeout and the fence ended", err, fence.Ended())
				}
				close(release)
			} else {
				close(release)
				if err := <-returned; err != nil {
					t.Fatalf("runBounded = %v, want the action's answer", err)
				}
			}
			if len(sets) != len(tc.wantSets) || !equalDurations(sets, tc.wantSets) {
				t.Errorf("timers set %v, want %v", sets, tc.wantSets)
			}
		})
	}
}

func equalDurations(a, b []time.Duration) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// A render that waits (on the API server, for a core) longer than its bound in wall time,
// but uses almost no CPU, is not failed: another tenant's load never uses up a render's bound.
func TestRenderThatWaitsKeepsItsBound(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const bound = 50 * time.Millisecond
		release := make(chan struct{})
		returned := make(chan error, 1)
		go func() {
			_, err := runBounded(context.Background(), runOptions{fence: &Fence{}, renderTimeout: bound},
				func() (*helmrelease.Release, error) {
					<-release
					return &helmrelease.Release{}, nil
				})
			returned <- err
		}()
		time.Sleep(10 * bound) // the bubble's clock: ten bounds pass while the render waits
		synctest.Wait()
		close(release)
		if err := <-returned; err != nil {
			t.Fatalf("a render that waited 10 bounds with no CPU used: %v", err)
		}
	})
}

// The guard render and Helm's share one bound: what the guard used is not given again.
func TestRenderBoundIsTheActions(t *testing.T) {
	const bound = 50 * time.Millisecond
	fence := &Fence{}
	fence.addRenderCPU(30 * time.Millisecond) // the guard's run
	timers := &fakeTimers{set: make(chan time.Duration, 8), c: make(chan time.Time)}
	meter := &fakeMeter{readable: true}
	started, returned := make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := runBounded(context.Background(), runOptions{fence: fence, renderTimeout: bound, after: timers.after,
			lock: func() threadMeter { return meter }}, func() (*helmrelease.Release, error) {
			close(started)
			select {}
		})
		returned <- err
	}()
	<-started
	if first := <-timers.set; first != 20*time.Millisecond {
		t.Fatalf("Helm's run was bounded at %s, want the 20ms the guard left", first)
	}
	meter.set(20 * time.Millisecond)
	timers.c <- time.Time{}
	if err := <-returned; !errors.Is(err, ErrRenderTimeout) {
		t.Fatalf("runBounded = %v, want ErrRenderTimeout once the action's 50ms are used", err)
	}
}
