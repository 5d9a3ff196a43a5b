package consumed

import (
	"context"
	"errors"
	"sync"
	"testing"
)

func TestClaimStepOrder(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.Consume(ctx, rec("req-1", "a")); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		step  Step
		taken bool
	}{
		{Step{Attempt: 3, Revision: 3}, true}, // attempt 2 has not been claimed
		{Step{Attempt: 2, Revision: 2}, false},
		{Step{Attempt: 2, Revision: 2}, true}, // never twice
		{Step{Attempt: 3, Revision: 3}, false},
		{Step{Remediation: "rollback"}, false},
		{Step{Remediation: "rollback"}, true},
		{Step{Attempt: 4, Revision: 5}, true}, // nothing after the remediation
	}
	for i, tc := range steps {
		err := s.ClaimStep(ctx, "req-1", tc.step)
		if tc.taken != errors.Is(err, ErrStepTaken) || (!tc.taken && err != nil) {
			t.Fatalf("step %d %+v: err = %v, want taken=%v", i, tc.step, err, tc.taken)
		}
	}
	got, err := s.StepsOf(ctx, "req-1")
	if err != nil {
		t.Fatal(err)
	}
	if want := (Steps{Attempt: 3, AttemptRevision: 3, Remediation: "rollback"}); got != want {
		t.Fatalf("steps = %+v, want %+v", got, want)
	}
	// The record keeps its binding: a redelivery still resumes on the same Secret.
	if first, err := s.Consume(ctx, rec("req-1", "a")); err != nil || first {
		t.Fatalf("consume after steps: first=%v err=%v", first, err)
	}
}

func TestClaimStepNeedsTheRecord(t *testing.T) {
	s, _, _ := newStore(t)
	err := s.ClaimStep(context.Background(), "never", Step{Attempt: 2, Revision: 2})
	if err == nil || errors.Is(err, ErrStepTaken) {
		t.Fatalf("claim without a record: %v", err)
	}
}

func TestClaimStepOneOfMany(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.Consume(ctx, rec("req-1", "a")); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	won := 0
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := s.ClaimStep(ctx, "req-1", Step{Attempt: 2, Revision: 2})
			if err == nil {
				mu.Lock()
				won++
				mu.Unlock()
			} else if !errors.Is(err, ErrStepTaken) {
				t.Errorf("claim: %v", err)
			}
		}()
	}
	wg.Wait()
	if won != 1 {
		t.Fatalf("%d claims of attempt 2 succeeded, want 1", won)
	}
}
