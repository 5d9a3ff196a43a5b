// Package reader is submit's read side: list, get and history of releases as Helm reads
// them, answered only for namespaces the caller may read (console's /api/helm/releases,
// /release and /release/history).
package reader

import (
	"context"
	"fmt"

	"go.uber.org/zap"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
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

// Service answers reads. With a nil Authorizer or a nil user (authentication off) every
// namespace is readable.
type Service struct {
	Helm       Helm
	Authorizer Authorizer
	// Progress, when set, adds a pending revision's progress to get and list.
	Progress Progress
	// Log, when set, is told of progress that could not be read (the answer goes without).
	Log *zap.SugaredLogger
	// Options go to every Helm read (tests give a memory driver).
	Options []helmexec.Option
	// Secrets, when set, answers lists with limitInfo from the latest revisions' heads
	// (cached by resourceVersion) instead of Helm's decode of every whole record.
	Secrets Secrets
	// Index, with Secrets, says which records exist (a metadata-only list): only records
	// that changed since the last list are read whole.
	Index Index

	heads heads
}

// readNeed is the permission a read needs: Helm's release records are secrets.
func readNeed(namespace string) auth.Need {
	return auth.Need{Verb: "list", Resource: "secrets", Namespace: namespace}
}

// List is the latest revision of every release of namespace ("" = every namespace the
// caller may read), in every status. With limitInfo, each is trimmed to api.ReleaseInfo.
func (s *Service) List(ctx context.Context, u *auth.User, namespace string, limitInfo bool) (interface{}, error) {
	if namespace != "" {
		if err := s.canRead(ctx, u, namespace); err != nil {
			return nil, err
		}
	}
	if limitInfo && s.Secrets != nil {
		return s.limitedList(ctx, u, namespace)
	}
	rels, err := s.Helm.List(ctx, namespace, s.Options...)
	if err != nil {
		return nil, err
	}
	if namespace == "" {
		if rels, err = s.readable(ctx, u, rels); err != nil {
			return nil, err
		}
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
	return out, nil
}

// limitedList is List with limitInfo through listLimited, filtered as List filters.
func (s *Service) limitedList(ctx context.Context, u *auth.User, namespace string) ([]api.ReleaseInfo, error) {
	infos, err := s.listLimited(ctx, namespace)
	if err != nil || namespace != "" || u == nil || s.Authorizer == nil {
		return infos, err
	}
	allowed := map[string]bool{}
	out := infos[:0]
	for _, r := range infos {
		ok, seen := allowed[r.Namespace]
		if !seen {
			if ok, err = s.Authorizer.Allowed(ctx, u, readNeed(r.Namespace)); err != nil {
				return nil, fmt.Errorf("may %s read namespace %s: %w", u.Name, r.Namespace, err)
			}
			allowed[r.Namespace] = ok
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}

// Latest is the latest revision of a release, whatever its status, with its progress.
func (s *Service) Latest(ctx context.Context, u *auth.User, namespace, name string) (api.Release, error) {
	if err := s.canRead(ctx, u, namespace); err != nil {
		return api.Release{}, err
	}
	rel, err := s.Helm.Latest(ctx, namespace, name, s.Options...)
	if err != nil {
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
	return out
}

// History is every revision of a release, oldest first.
func (s *Service) History(ctx context.Context, u *auth.User, namespace, name string) ([]*helmrelease.Release, error) {
	if err := s.canRead(ctx, u, namespace); err != nil {
		return nil, err
	}
	return s.Helm.History(ctx, namespace, name, s.Options...)
}

func (s *Service) canRead(ctx context.Context, u *auth.User, namespace string) error {
	if u == nil || s.Authorizer == nil {
		return nil
	}
	return s.Authorizer.Check(ctx, u, readNeed(namespace))
}

// readable keeps the releases of namespaces the caller may read, asking once per namespace.
func (s *Service) readable(ctx context.Context, u *auth.User, rels []*helmrelease.Release) ([]*helmrelease.Release, error) {
	if u == nil || s.Authorizer == nil {
		return rels, nil
	}
	allowed := map[string]bool{}
	out := make([]*helmrelease.Release, 0, len(rels))
	for _, r := range rels {
		ok, seen := allowed[r.Namespace]
		if !seen {
			var err error
			if ok, err = s.Authorizer.Allowed(ctx, u, readNeed(r.Namespace)); err != nil {
				return nil, fmt.Errorf("may %s read namespace %s: %w", u.Name, r.Namespace, err)
			}
			allowed[r.Namespace] = ok
		}
		if ok {
			out = append(out, r)
		}
	}
	return out, nil
}
