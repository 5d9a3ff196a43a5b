package source

import (
	"fmt"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"
)

// Each caller has a bucket of its own: one caller's burst does not slow another; a token
// comes back at the rate, on the (fake) clock.
func TestCallerLimitsAreOneBucketPerCaller(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Unix(1000, 0))
	l := &CallerLimits{Rate: 2, Burst: 3, Clock: clock}
	for i := 0; i < 3; i++ {
		if ok, _ := l.Allow("mallory"); !ok {
			t.Fatalf("call %d within the burst refused", i+1)
		}
	}
	ok, retry := l.Allow("mallory")
	if ok || retry != 500*time.Millisecond {
		t.Errorf("past the burst: allowed %v, retry after %s; want refused, 500ms", ok, retry)
	}
	if ok, _ := l.Allow("alice"); !ok {
		t.Error("another caller was refused for mallory's burst")
	}
	clock.Step(500 * time.Millisecond)
	if ok, _ := l.Allow("mallory"); !ok {
		t.Error("a token did not come back after 1/rate")
	}
	if ok, _ := l.Allow("mallory"); ok {
		t.Error("two tokens came back after 1/rate")
	}
}

// The callers remembered are bounded; a caller whose bucket is not full again is not
// forgotten while one whose bucket is (as good as new) can be.
func TestCallerLimitsForgetIdleCallersFirst(t *testing.T) {
	clock := testingclock.NewFakeClock(time.Unix(1000, 0))
	l := &CallerLimits{Rate: 1, Burst: 2, MaxCallers: 3, Clock: clock}
	l.Allow("busy")
	l.Allow("busy")
	l.Allow("idle-0")
	l.Allow("idle-1")
	clock.Step(1500 * time.Millisecond) // the idle buckets are full again, busy's is not
	l.Allow("new")
	if _, ok := l.byCaller["busy"]; !ok || len(l.byCaller) > 3 {
		t.Errorf("callers remembered %v: want busy kept, at most 3", l.byCaller)
	}
	if ok, _ := l.Allow("busy"); !ok {
		t.Error("busy has 1.5 tokens and was refused")
	}
	if ok, _ := l.Allow("busy"); ok {
		t.Error("busy was forgotten: its bucket was new again")
	}
	for i := 0; i < 10; i++ {
		l.Allow(fmt.Sprintf("more-%d", i))
	}
	if len(l.byCaller) > 3 {
		t.Errorf("%d callers remembered, want at most 3", len(l.byCaller))
	}
}
