package localstack

import (
	"context"
	"fmt"
	"os"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	typedcoordinationv1 "k8s.io/client-go/kubernetes/typed/coordination/v1"
)

// defaultOwnNamespace is ASYNC_HELM_NAMESPACE's default (functions' config).
const defaultOwnNamespace = "async-helm"

// ownNamespace is the notifiers' ASYNC_HELM_NAMESPACE (the last one set wins, as in a
// process's environment), where their election Lease is.
func (cfg Config) ownNamespace() string {
	own := defaultOwnNamespace
	for _, kv := range cfg.env(Notifier, 0, "") {
		if v, ok := strings.CutPrefix(kv, "ASYNC_HELM_NAMESPACE="); ok && v != "" {
			own = v
		}
	}
	return own
}

// electionLeases is the Lease client of the notifiers' own namespace (nil without Rest).
func (cfg Config) electionLeases() (typedcoordinationv1.LeaseInterface, error) {
	if cfg.Rest == nil {
		return nil, nil
	}
	c, err := kubernetes.NewForConfig(cfg.Rest)
	if err != nil {
		return nil, fmt.Errorf("kubernetes client: %w", err)
	}
	return c.CoordinationV1().Leases(cfg.ownNamespace()), nil
}

// deleteNotifierLease deletes the stack's election Lease once its notifiers stopped: a
// stack leaves nothing of its own in async-helm's namespace, which every stack on the
// cluster shares.
func (s *Stack) deleteNotifierLease() {
	if s.leases == nil || s.NotifierLease == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := s.leases.Delete(ctx, s.NotifierLease, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintf(os.Stderr, "localstack: election Lease %s left behind: %v\n", s.NotifierLease, err)
	}
}
