package submitter

import (
	"sync"
	"testing"
	"time"

	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/release"
)

// Each step on the way to a 201 is observed once per request, and the wrapped service
// behaves as before (it accepts, reserves one Secret, sends one event).
func TestObserveStepsReportsEachStepOnce(t *testing.T) {
	e := newEnv(t)
	e.svc.Authorizer = &authz{allow: map[auth.Need]bool{
		{Verb: "create", Resource: "secrets", Namespace: "ns"}: true,
		{Verb: "update", Resource: "secrets", Namespace: "ns"}: true,
	}}
	var mu sync.Mutex
	seen := map[string]int{}
	ObserveSteps(e.svc, func(step string, d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		if d < 0 {
			t.Errorf("%s took %s", step, d)
		}
		seen[step]++
	})
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install("web"), &auth.User{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	for _, step := range []string{StepAuthorize, StepChart, StepReserve, StepSend} {
		if seen[step] != 1 {
			t.Errorf("step %s observed %d times, want 1 (all: %v)", step, seen[step], seen)
		}
	}
	if len(e.secrets()) != 1 || len(e.sender.sent) != 1 {
		t.Errorf("%d secrets, %d events", len(e.secrets()), len(e.sender.sent))
	}
}
