// Package reader is submit's read side (the console's releases, release and history routes):
// Helm's list, get and history, answered only for namespaces the caller may read.
package reader

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"sync"

	"go.uber.org/zap"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/fairqueue"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release"
)

// Helm reads releases (helmexec.Factory).
type Helm interface {
	List(ctx context.Context, namespace string, opts ...helmexec.Option) ([]*helmrelease.Release, error)
	History(ctx context.Context, namespace, name string, opts ...helmexec.Option) ([]*helmrelease.Release, error)
	Latest(ctx context.Context, namespace, name string, opts ...helmexec.Option) (*helmrelease.Release, error)
}

// Authorizer answers whether a user may do something (auth.Authorizer).
type Authorizer interface {
	Check(ctx context.Context, u *auth.User, needs ...auth.Need) error
	Allowed(ctx context.Context, u *auth.User, n auth.Need) (bool, error)
}

// Progress reads what the action of a pending revision is doing now (release.Store).
type Progress interface {
	Progress(ctx context.Context, namespace, secretName string) (*progress.Progress, error)
}

// RecordNamespaces names the namespaces that hold release records (release.RevisionIndex).
type RecordNamespaces interface {
	RecordNamespaces() []string
}

// Service answers reads; with a nil Authorizer or user (authentication off), of every namespace.
type Service struct {
	Helm       Helm
	Authorizer Authorizer
	// Progress, when set, adds a pending revision's progress to get and list.
	Progress Progress
	// Log, when set, is told of progress that could not be read (the answer goes without).
	Log *zap.SugaredLogger
	// Options go to every Helm read (tests give a memory driver).
	Options []helmexec.Option
	// Secrets, when set, answers limitInfo lists from the latest revisions' heads (limited.go).
	Secrets Secrets
	// Index, with Secrets, lists which records exist (metadata): only changed ones are read.
	Index Index
	// Namespaces, when set, says from a cache which namespaces hold records: a caller who may
	// not read every namespace then has only its own listed (namespacesScope).
	Namespaces RecordNamespaces
	// Queue, when set, adds `queue` to pending revisions no executor has started (queue.go).
	Queue *Queue

	heads     heads
	slotsOnce sync.Once
	slots     *fairqueue.Queue // open's
}

// readNeed is the permission a read needs: Helm's release records are secrets.
func readNeed(namespace string) auth.Need {
	return auth.Need{Verb: "list", Resource: "secrets", Namespace: namespace}
}

// List is the latest revision of every release of namespace ("" = every one the caller may read:
// readScope), in every status; limitInfo trims each to api.ReleaseInfo.
func (s *Service) List(ctx context.Context, u *auth.User, namespace string, limitInfo bool, opts ...Option) (any, error) {
	sl, err := s.open(ctx, u, namespace, opts)
	if err != nil {
		return nil, err
	}
	defer sl.close()
	sc, err := s.readScope(ctx, u, namespace)
	if err != nil {
		return nil, err
	}
	if limitInfo && s.Secrets != nil {
		rows, err := s.listLimited(ctx, sc)
		return s.Queue.mark(rows), err
	}
	rels, err := s.helmList(ctx, sc, sl)
	if err != nil {
		return nil, err
	}
	if !limitInfo {
		full := make([]api.Release, 0, len(rels))
		for _, rel := range rels {
			full = append(full, s.withProgress(ctx, rel))
		}
		return full, nil
	}
	out := make([]api.ReleaseInfo, 0, len(rels))
	for _, rel := range rels {
		out = append(out, api.Limit(rel))
	}
	return s.Queue.mark(out), nil
}

// helmList runs Helm's list once when the caller may read every namespace holding records,
// else once per allowed namespace, each within the slot's budget (ErrTooLarge past it).
func (s *Service) helmList(ctx context.Context, sc scope, sl *slot) ([]*helmrelease.Release, error) {
	if sc.all() {
		rels, err := s.Helm.List(ctx, sc.namespace, sl.helm...)
		if err = sl.within(err); err != nil || sc.allowed == nil {
			return rels, err
		}
		// A namespace that got records after the metadata list was not reviewed: left out.
		kept := rels[:0]
		for _, r := range rels {
			if sc.allowed[r.Namespace] {
				kept = append(kept, r)
			}
		}
		return kept, nil
	}
	var out []*helmrelease.Release
	for _, ns := range sc.namespaces() {
		rels, err := s.Helm.List(ctx, ns, sl.helm...)
		if err = sl.within(err); err != nil {
			return nil, err
		}
		out = append(out, rels...)
	}
	slices.SortStableFunc(out, func(a, b *helmrelease.Release) int { return helmOrder(a.Name, a.Namespace, b.Name, b.Namespace) })
	return out, nil
}

// helmOrder is Helm's list order: by name, then namespace (stable across namespaces).
func helmOrder(aName, aNamespace, bName, bNamespace string) int {
	return cmp.Or(strings.Compare(aName, bName), strings.Compare(aNamespace, bNamespace))
}

// Latest is the latest revision of a release, whatever its status, with its progress.
func (s *Service) Latest(ctx context.Context, u *auth.User, namespace, name string, opts ...Option) (api.Release, error) {
	sl, err := s.open(ctx, u, namespace, opts)
	if err != nil {
		return api.Release{}, err
	}
	defer sl.close()
	rel, err := s.Helm.Latest(ctx, namespace, name, sl.helm...)
	if err = sl.within(err); err != nil {
		return api.Release{}, err
	}
	return s.withProgress(ctx, rel), nil
}

// withProgress adds what a pending revision's action is doing now.
func (s *Service) withProgress(ctx context.Context, rel *helmrelease.Release) api.Release {
	out := api.Release{Release: rel}
	if s.Progress == nil || rel.Info == nil || !release.IsPending(rel.Info.Status.String()) {
		return out
	}
	p, err := s.Progress.Progress(ctx, rel.Namespace, release.SecretName(rel.Name, rel.Version))
	if err != nil && s.Log != nil {
		s.Log.Warnw("progress not read", "namespace", rel.Namespace, "release", rel.Name, "error", err)
	}
	out.Progress = p
	out.Queue = s.Queue.of(rel.Namespace, rel.Name, rel.Version, p)
	return out
}

// History is every revision of a release, oldest first.
func (s *Service) History(ctx context.Context, u *auth.User, namespace, name string, opts ...Option) ([]*helmrelease.Release, error) {
	sl, err := s.open(ctx, u, namespace, opts)
	if err != nil {
		return nil, err
	}
	defer sl.close()
	rels, err := s.Helm.History(ctx, namespace, name, sl.helm...)
	return rels, sl.within(err)
}
