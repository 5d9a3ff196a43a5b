package reader

import (
	"context"
	"errors"
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/auth"
)

// ErrNoIndex is returned when a list of every namespace must be narrowed to the caller's
// namespaces but no metadata index says which namespaces hold records.
var ErrNoIndex = errors.New("listing every namespace needs the release metadata index")

// scope is what a list may read: one namespace, every namespace (authorization off), or
// the namespaces the caller may read among those that hold records.
type scope struct {
	namespace string // "" = every namespace
	// allowed, when set, are the only namespaces that may be read (namespace is "").
	allowed map[string]bool
	// every is true when allowed holds every namespace the index saw with records.
	every bool
	// metas are the index's records of the allowed namespaces (nil: not listed yet).
	metas []*metav1.PartialObjectMetadata
}

// all says one read of namespace covers the scope (then filtered by allowed, if set).
func (sc scope) all() bool { return sc.allowed == nil || (sc.every && len(sc.allowed) > 0) }

// namespaces are the allowed namespaces, sorted.
func (sc scope) namespaces() []string {
	out := make([]string, 0, len(sc.allowed))
	for ns := range sc.allowed {
		out = append(out, ns)
	}
	sort.Strings(out)
	return out
}

// may says whether a record of ns is in the scope.
func (sc scope) may(ns string) bool {
	if sc.allowed != nil {
		return sc.allowed[ns]
	}
	return sc.namespace == "" || sc.namespace == ns
}

// readScope authorizes a list before anything is read: a named namespace needs the
// caller's read right; without one, the namespaces holding release records come from the
// metadata index (labels only, nothing decoded) and each is reviewed once (the
// Authorizer's cache makes repeated lists cheap). Records are read only afterwards, and
// only of the allowed namespaces: submit's own rights never fetch or decode a namespace
// the caller may not read.
func (s *Service) readScope(ctx context.Context, u *auth.User, namespace string) (scope, error) {
	if namespace != "" {
		return scope{namespace: namespace}, s.canRead(ctx, u, namespace)
	}
	if u == nil || s.Authorizer == nil {
		return scope{}, nil
	}
	if s.Index == nil {
		return scope{}, ErrNoIndex
	}
	metas, err := s.Index.ReleaseMetas(ctx, "")
	if err != nil {
		return scope{}, err
	}
	decided := map[string]bool{}
	sc := scope{allowed: map[string]bool{}, every: true}
	for _, m := range metas {
		ns := m.GetNamespace()
		ok, seen := decided[ns]
		if !seen {
			if ok, err = s.Authorizer.Allowed(ctx, u, readNeed(ns)); err != nil {
				return scope{}, fmt.Errorf("may %s read namespace %s: %w", u.Name, ns, err)
			}
			decided[ns] = ok
			if ok {
				sc.allowed[ns] = true
			} else {
				sc.every = false
			}
		}
		if ok {
			sc.metas = append(sc.metas, m)
		}
	}
	if sc.metas == nil {
		sc.metas = []*metav1.PartialObjectMetadata{} // listed: nothing readable
	}
	return sc, nil
}
