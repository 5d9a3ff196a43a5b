package reader

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	"golang.org/x/sync/errgroup"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/auth"
)

// ErrNoIndex: a list of every namespace to narrow to the caller's, and no index of records.
var ErrNoIndex = errors.New("listing every namespace needs the release metadata index")

// scope is what a list may read: one namespace, all (authorization off), or the caller's readable ones.
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
func (sc scope) namespaces() []string { return slices.Sorted(maps.Keys(sc.allowed)) }

// may says whether a record of ns is in the scope.
func (sc scope) may(ns string) bool {
	if sc.allowed != nil {
		return sc.allowed[ns]
	}
	return sc.namespace == "" || sc.namespace == ns
}

// readScope authorizes a list before anything is read (a named namespace was, by open): the
// namespaces holding records come from the metadata index and each is reviewed (answers
// cached), so submit's own rights never fetch or decode a namespace the caller may not read.
func (s *Service) readScope(ctx context.Context, u *auth.User, namespace string) (scope, error) {
	if namespace != "" {
		return scope{namespace: namespace}, nil
	}
	if u == nil || s.Authorizer == nil {
		return scope{}, nil
	}
	if s.Index == nil {
		return scope{}, ErrNoIndex
	}
	if s.Namespaces != nil {
		everywhere, err := s.Authorizer.Allowed(ctx, u, readNeed(""))
		if err != nil {
			return scope{}, fmt.Errorf("may %s read every namespace: %w", u.Name, err)
		}
		if !everywhere {
			return s.namespacesScope(ctx, u)
		}
	}
	metas, err := s.Index.ReleaseMetas(ctx, "")
	if err != nil {
		return scope{}, err
	}
	allowed, err := s.allowedNamespaces(ctx, u, namespacesOf(metas))
	if err != nil {
		return scope{}, err
	}
	sc := scope{allowed: allowed, every: true}
	for _, m := range metas {
		if allowed[m.GetNamespace()] {
			sc.metas = append(sc.metas, m)
		} else {
			sc.every = false
		}
	}
	if sc.metas == nil {
		sc.metas = []*metav1.PartialObjectMetadata{} // listed: nothing readable
	}
	return sc, nil
}

// metasAtOnce bounds the per-namespace metadata lists of one all-namespaces list in flight.
const metasAtOnce = 8

// namespacesScope is readScope from the cache of namespaces with records, for a caller who may not
// read all: only allowed ones are listed (a namespace's first record shows once cached).
func (s *Service) namespacesScope(ctx context.Context, u *auth.User) (scope, error) {
	names := s.Namespaces.RecordNamespaces()
	allowed, err := s.reviewEach(ctx, u, names)
	if err != nil {
		return scope{}, err
	}
	sc := scope{allowed: allowed, every: len(names) > 0 && len(allowed) == len(names), metas: []*metav1.PartialObjectMetadata{}}
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(metasAtOnce)
	for ns := range allowed {
		g.Go(func() error {
			ms, err := s.Index.ReleaseMetas(gctx, ns)
			if err != nil {
				return err
			}
			mu.Lock()
			sc.metas = append(sc.metas, ms...)
			mu.Unlock()
			return nil
		})
	}
	return sc, g.Wait()
}

// namespacesOf lists the namespaces of metas, each once, in order of first sight.
func namespacesOf(metas []*metav1.PartialObjectMetadata) []string {
	var names []string
	seen := map[string]bool{}
	for _, m := range metas {
		if ns := m.GetNamespace(); !seen[ns] {
			seen[ns] = true
			names = append(names, ns)
		}
	}
	return names
}

// reviewsAtOnce bounds the access reviews of one all-namespaces list in flight: a user who
// may read 10 of 1,000 namespaces holding records needs 1,000 answers, and one after
// another they took longer than the list's deadline on a busy API server.
const reviewsAtOnce = 32

// allowedNamespaces are those of names the caller may read: all after one review, or reviewEach.
func (s *Service) allowedNamespaces(ctx context.Context, u *auth.User, names []string) (map[string]bool, error) {
	allowed := make(map[string]bool, len(names))
	if len(names) > 1 {
		everywhere, err := s.Authorizer.Allowed(ctx, u, readNeed(""))
		if err != nil {
			return nil, fmt.Errorf("may %s read every namespace: %w", u.Name, err)
		}
		if everywhere {
			for _, ns := range names {
				allowed[ns] = true
			}
			return allowed, nil
		}
	}
	return s.reviewEach(ctx, u, names)
}

// reviewEach are the namespaces of names the caller may read, reviewsAtOnce reviews at a time.
func (s *Service) reviewEach(ctx context.Context, u *auth.User, names []string) (map[string]bool, error) {
	allowed := make(map[string]bool, len(names))
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(reviewsAtOnce)
	for _, ns := range names {
		g.Go(func() error {
			ok, err := s.Authorizer.Allowed(gctx, u, readNeed(ns))
			if err != nil {
				return fmt.Errorf("may %s read namespace %s: %w", u.Name, ns, err)
			}
			if ok {
				mu.Lock()
				allowed[ns] = true
				mu.Unlock()
			}
			return nil
		})
	}
	return allowed, g.Wait()
}
