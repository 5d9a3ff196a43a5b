package consumed

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// annResumes counts how often a consumed request was resumed after its executor lost it.
const annResumes = "async-helm.io/resumes"

// MaxResumes is how often a request's action is started again after its executor lost it
// (died, or its Lease in the tenant's namespace was deleted or taken): a crash is resumed,
// a tenant deleting the Lease again and again is not. A live executor starved past its Lease
// loses it too (at 2, a crash and two such takeovers failed an install). It is what a
// tenant can cost the caller: at most this many re-runs of the same action.
const MaxResumes = 5

// ErrTooManyResumes: the request was resumed MaxResumes times already.
var ErrTooManyResumes = errors.New("request resumed too often")

// ClaimResume counts one more resume of the request, or answers ErrTooManyResumes. A
// conditional update: of two executors resuming at once, each claims its own count.
func (s *Store) ClaimResume(ctx context.Context, requestID string) error {
	leases := s.Client.CoordinationV1().Leases(s.ns())
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		l, err := leases.Get(ctx, LeaseName(requestID), metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("claim a resume of request %s: %w", requestID, err)
		}
		n, _ := strconv.Atoi(l.Annotations[annResumes])
		if n >= MaxResumes {
			return fmt.Errorf("%w: %d times", ErrTooManyResumes, n)
		}
		if l.Annotations == nil {
			l.Annotations = map[string]string{}
		}
		l.Annotations[annResumes] = strconv.Itoa(n + 1)
		_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
		return err
	})
}
