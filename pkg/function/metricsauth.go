package function

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"time"

	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/async-helm/async-helm/pkg/auth"
)

// MetricsGuard serves /metrics only to a caller the API server authenticates (TokenReview)
// and allows "get" on the non-resource URL /metrics (SubjectAccessReview), as
// kube-rbac-proxy does: submit's metrics name every namespace's queue, and a
// tenant's pod reaches every function's port.
type MetricsGuard struct {
	Authn  *auth.Authenticator
	Client kubernetes.Interface
	// allowed caches who may scrape, by identity, for metricsAllowedTTL.
	allowed *cache.LRUExpireCache
}

const metricsAllowedTTL = 10 * time.Second

// NewMetricsGuard checks scrapers with client.
func NewMetricsGuard(client kubernetes.Interface) *MetricsGuard {
	return &MetricsGuard{Authn: &auth.Authenticator{Client: client}, Client: client, allowed: cache.NewLRUExpireCache(256)}
}

// Wrap answers 401 to a request without a valid token, 403 to a caller who may not get
// /metrics, and serves next to the others.
func (g *MetricsGuard) Wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		u, err := g.Authn.Authenticate(r.Context(), r)
		if err != nil {
			code := http.StatusUnauthorized
			if errors.Is(err, auth.ErrForbidden) {
				code = http.StatusForbidden
			}
			http.Error(w, err.Error(), code)
			return
		}
		ok, err := g.may(r.Context(), u)
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
			return
		}
		if !ok {
			http.Error(w, fmt.Sprintf("user %q may not get /metrics", u.Name), http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (g *MetricsGuard) may(ctx context.Context, u *auth.User) (bool, error) {
	key := u.Name + "\x00" + u.UID + "\x00" + strings.Join(u.Groups, "\x00")
	if _, ok := g.allowed.Get(key); ok {
		return true, nil
	}
	extra := map[string]authzv1.ExtraValue{}
	for k, v := range u.Extra {
		extra[k] = v
	}
	sar, err := g.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
		User: u.Name, UID: u.UID, Groups: u.Groups, Extra: extra,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: "/metrics", Verb: "get"},
	}}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("subject access review: %w", err)
	}
	if sar.Status.Allowed {
		g.allowed.Add(key, true, metricsAllowedTTL)
	}
	return sar.Status.Allowed, nil
}

// metricsGuardFor is the guard METRICS_AUTH asks for: "on", "off", or "" (on in a pod,
// where other pods reach the port; off for a local process on loopback).
func metricsGuardFor(mode string) (*MetricsGuard, error) {
	switch mode {
	case "off":
		return nil, nil
	case "":
		if os.Getenv("KUBERNETES_SERVICE_HOST") == "" {
			return nil, nil
		}
	case "on":
	default:
		return nil, fmt.Errorf("METRICS_AUTH %q: want on, off or empty", mode)
	}
	cfg, err := rest.InClusterConfig()
	if err != nil {
		if cfg, err = clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG")); err != nil {
			return nil, fmt.Errorf("METRICS_AUTH: kubernetes config: %w", err)
		}
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, fmt.Errorf("METRICS_AUTH: %w", err)
	}
	return NewMetricsGuard(client), nil
}
