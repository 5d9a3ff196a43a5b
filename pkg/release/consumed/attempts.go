package consumed

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// The steps after a request's first attempt, on its record (docs/design.md, "Retries and
// remediation"): only the executor writes them, so a step claimed is never run twice.
const (
	annAttempt         = "async-helm.io/attempt"
	annAttemptRevision = "async-helm.io/attempt-revision"
	annRemediation     = "async-helm.io/remediation"
)

// ErrStepTaken: the step (or a later one) was already claimed for the request.
var ErrStepTaken = errors.New("step already claimed for this request")

// Step is a retry (Attempt >= 2, on Revision) or, with Remediation set, the remediation
// after the last attempt.
type Step struct {
	Attempt     int
	Revision    int
	Remediation string
}

// Steps is what a request's record says ran after its first attempt.
type Steps struct {
	// Attempt is the latest attempt claimed (1 when no retry was), on AttemptRevision.
	Attempt         int
	AttemptRevision int
	// Remediation is the claimed remediation ("" when none was).
	Remediation string
}

// ClaimStep records that step starts. A retry k is claimed only when the record's latest
// attempt is k-1 and no remediation was claimed; a remediation only once. The write is
// conditional on the record's resourceVersion, so of two executors one claims.
func (s *Store) ClaimStep(ctx context.Context, requestID string, step Step) error {
	leases := s.Client.CoordinationV1().Leases(s.ns())
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(ctx, LeaseName(requestID), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := claimable(stepsOf(l.Annotations), step); err != nil {
			return err
		}
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		if step.Remediation != "" {
			l.Annotations[annRemediation] = step.Remediation
		} else {
			l.Annotations[annAttempt] = strconv.Itoa(step.Attempt)
			l.Annotations[annAttemptRevision] = strconv.Itoa(step.Revision)
		}
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
	switch {
	case errors.Is(err, ErrStepTaken):
		return fmt.Errorf("request %s: %w", requestID, err)
	case apierrors.IsNotFound(err):
		return fmt.Errorf("claim a step of request %s: it was never consumed: %w", requestID, err)
	case err != nil:
		return fmt.Errorf("claim a step of request %s: %w", requestID, err)
	}
	return nil
}

// claimable says whether step may start after what the record says ran.
func claimable(ran Steps, step Step) error {
	switch {
	case ran.Remediation != "":
		return fmt.Errorf("%w: remediation %s already ran", ErrStepTaken, ran.Remediation)
	case step.Remediation != "":
		return nil
	case step.Attempt != ran.Attempt+1:
		return fmt.Errorf("%w: attempt %d claimed after attempt %d", ErrStepTaken, step.Attempt, ran.Attempt)
	}
	return nil
}

// StepsOf reads the steps of a request's record (attempt 1 when it has none).
func (s *Store) StepsOf(ctx context.Context, requestID string) (Steps, error) {
	l, err := s.Client.CoordinationV1().Leases(s.ns()).Get(ctx, LeaseName(requestID), metav1.GetOptions{})
	if err != nil {
		return Steps{}, fmt.Errorf("read the steps of request %s: %w", requestID, err)
	}
	return stepsOf(l.Annotations), nil
}

func stepsOf(a map[string]string) Steps {
	st := Steps{Attempt: 1, Remediation: a[annRemediation]}
	if n, err := strconv.Atoi(a[annAttempt]); err == nil && n > 1 {
		st.Attempt = n
		st.AttemptRevision, _ = strconv.Atoi(a[annAttemptRevision])
	}
	return st
}
