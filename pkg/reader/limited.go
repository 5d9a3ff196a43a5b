package reader

import (
	"context"
	"sort"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// Secrets lists release secrets as submit's own identity (release.Store).
type Secrets interface {
	ReleaseSecrets(ctx context.Context, namespace string) ([]corev1.Secret, error)
}

// heads caches the decoded head (api.ReleaseInfo) of each release secret by UID and
// resourceVersion: a list with limitInfo decodes only records that changed since the last
// list of the same namespace. Each list replaces its namespace's entries, so the cache
// holds only what the last list of each namespace returned.
type heads struct {
	mu sync.Mutex
	by map[string]map[types.UID]head // namespace ("" = all) -> uid -> head
}

type head struct {
	resourceVersion string
	info            api.ReleaseInfo
}

// listLimited answers a list with limitInfo from the release secrets' labels and the heads
// of the latest revisions only, as Helm's list would show them (latest revision of every
// release, every status, sorted by name), without decoding whole records: make bench
// found Helm's full decode of every revision was most of a list's time.
func (s *Service) listLimited(ctx context.Context, namespace string) ([]api.ReleaseInfo, error) {
	secrets, err := s.Secrets.ReleaseSecrets(ctx, namespace)
	if err != nil {
		return nil, err
	}
	type key struct{ ns, name string }
	latest := map[key]*corev1.Secret{}
	version := map[key]int{}
	var unlabelled []*corev1.Secret
	for i := range secrets {
		sec := &secrets[i]
		v, err := strconv.Atoi(sec.Labels[release.LabelVersion])
		name := sec.Labels[release.LabelName]
		if err != nil || name == "" {
			unlabelled = append(unlabelled, sec) // not as Helm labels them: decode to know
			continue
		}
		k := key{sec.Namespace, name}
		if _, ok := latest[k]; !ok || v > version[k] {
			latest[k], version[k] = sec, v
		}
	}
	s.heads.mu.Lock()
	old := s.heads.by[namespace]
	s.heads.mu.Unlock()
	fresh := make(map[types.UID]head, len(latest))
	decode := func(sec *corev1.Secret) (api.ReleaseInfo, bool) {
		if h, ok := old[sec.UID]; ok && h.resourceVersion == sec.ResourceVersion {
			fresh[sec.UID] = h
			return h.info, true
		}
		var info api.ReleaseInfo
		if err := release.DecodeInto(sec.Data["release"], &info); err != nil {
			if s.Log != nil {
				s.Log.Warnw("release record not decoded; left out of the list", "namespace", sec.Namespace, "secret", sec.Name, "error", err)
			}
			return info, false
		}
		fresh[sec.UID] = head{sec.ResourceVersion, info}
		return info, true
	}
	out := make([]api.ReleaseInfo, 0, len(latest))
	for _, sec := range latest {
		if info, ok := decode(sec); ok {
			out = append(out, info)
		}
	}
	// Records without Helm's labels: keep the latest revision of each, as Helm does.
	for _, sec := range unlabelled {
		info, ok := decode(sec)
		if !ok {
			continue
		}
		replaced := false
		for i := range out {
			if out[i].Name == info.Name && out[i].Namespace == info.Namespace {
				if info.Version > out[i].Version {
					out[i] = info
				}
				replaced = true
				break
			}
		}
		if !replaced {
			out = append(out, info)
		}
	}
	s.heads.mu.Lock()
	if s.heads.by == nil {
		s.heads.by = map[string]map[types.UID]head{}
	}
	s.heads.by[namespace] = fresh
	s.heads.mu.Unlock()
	// Helm's list sorts by name (then namespace, for a stable order across namespaces).
	sort.Slice(out, func(i, j int) bool {
		if out[i].Name != out[j].Name {
			return out[i].Name < out[j].Name
		}
		return out[i].Namespace < out[j].Namespace
	})
	return out, nil
}
