// Package testwait is the tests' one wait for something that happens on its own
// (k8s.io/apimachinery's wait.PollUntilContextTimeout). A test that shows that nothing
// happens does not wait: it moves a fake clock (internal/fakekube.Clock).
package testwait

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Timeout is For's: ample for a fake cluster, short enough to fail fast.
const Timeout = 10 * time.Second

// For waits until cond holds, failing t after Timeout.
func For(t testing.TB, cond func() bool) {
	t.Helper()
	Within(t, Timeout, "the condition", cond)
}

// Within waits up to timeout for cond, failing t with what it waited for.
func Within(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !Until(timeout, cond) {
		t.Fatalf("timed out after %s waiting for %s", timeout, what)
	}
}

// Until polls cond until it holds (true) or timeout passes (false), for a test that says
// more than Within when it fails. It polls every timeout/2000, between 2 ms and 100 ms: a
// fake's conditions are cheap, a real cluster's are API calls.
func Until(timeout time.Duration, cond func() bool) bool {
	every := min(max(timeout/2000, 2*time.Millisecond), 100*time.Millisecond)
	err := wait.PollUntilContextTimeout(context.Background(), every, timeout, true,
		func(context.Context) (bool, error) { return cond(), nil })
	return err == nil
}
