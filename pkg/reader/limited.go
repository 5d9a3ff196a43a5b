package reader

import (
	"context"
	"maps"
	"slices"
	"strconv"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// Secrets reads release secrets' list heads as submit (release.Store): callers check access.
type Secrets interface {
	ReleaseHeads(ctx context.Context, namespace string) ([]release.ListHead, error)
	ReleaseHead(ctx context.Context, namespace, name string) (*release.ListHead, error)
}

// Index lists release secrets' metadata (release.Store) from the API server, not from an
// informer's cache: a list right after an install must show it.
type Index interface {
	ReleaseMetas(ctx context.Context, namespace string) ([]*metav1.PartialObjectMetadata, error)
}

// fetchEach is how many changed records a list fetches one by one; more are listed at once.
const fetchEach = 32

// heads caches each release secret's decoded head by UID and resourceVersion: a limitInfo list
// decodes only records changed since the last list of their namespace, whose entries it replaces.
type heads struct {
	mu sync.Mutex
	by map[string]map[types.UID]head // namespace -> uid -> head
}

type head struct {
	resourceVersion string
	info            api.ReleaseInfo
}

// listLimited answers a list with limitInfo as Helm's list would (latest revision of every
// release, every status, by name) from the labels and the latest revisions' heads, never
// whole records; with an Index, only the records changed since the last list are read.
func (s *Service) listLimited(ctx context.Context, sc scope) ([]api.ReleaseInfo, error) {
	metas, bodies, err := s.limitedMetas(ctx, sc)
	if err != nil {
		return nil, err
	}
	want := latestRecords(metas)
	s.heads.mu.Lock()
	old := s.heads.by
	s.heads.mu.Unlock()
	fresh := make(map[types.UID]head, len(want))
	var missing []metav1.Object
	for _, m := range want {
		if h, ok := old[m.GetNamespace()][m.GetUID()]; ok && h.resourceVersion == m.GetResourceVersion() {
			fresh[m.GetUID()] = h
		} else if bodies[m.GetUID()] == nil {
			missing = append(missing, m)
		}
	}
	if err := s.fetch(ctx, sc, missing, bodies); err != nil {
		return nil, err
	}
	out := make([]api.ReleaseInfo, 0, len(want))
	byName := map[key]int{}
	for _, m := range want {
		h, ok := s.headOf(m, fresh, bodies)
		if !ok {
			continue
		}
		// Records without Helm's labels: the latest revision of each, as Helm keeps.
		k := key{h.info.Namespace, h.info.Name}
		if i, seen := byName[k]; seen {
			if h.info.Version > out[i].Version {
				out[i] = h.info
			}
			continue
		}
		byName[k] = len(out)
		out = append(out, h.info)
	}
	s.heads.keep(sc, want, fresh)
	slices.SortFunc(out, func(a, b api.ReleaseInfo) int { return helmOrder(a.Name, a.Namespace, b.Name, b.Namespace) })
	return out, nil
}

// headOf is the list's head of record m: cached while its resourceVersion is unchanged,
// else decoded from its body and kept in fresh. False leaves the record out.
func (s *Service) headOf(m metav1.Object, fresh map[types.UID]head, bodies map[types.UID]*release.ListHead) (head, bool) {
	h, cached := fresh[m.GetUID()]
	if !cached {
		body := bodies[m.GetUID()]
		if body == nil {
			return head{}, false // deleted since the index saw it
		}
		if body.Err != nil {
			if s.Log != nil {
				s.Log.Warnw("release record not decoded; left out of the list", "namespace", body.Namespace, "secret", body.Name, "error", body.Err)
			}
			return head{}, false
		}
		h.info = api.Limit(body.Release)
		// The body's own resourceVersion: a body newer than the index is cached as such.
		h.resourceVersion = body.ResourceVersion
		fresh[m.GetUID()] = h
	}
	// The payload is the tenant's: bound to its Secret as Helm's reads bind it
	// (release.GuardedSecrets), else one naming namespace victim would stand for victim's
	// release. Its head stays cached, so it is not read again until it changes.
	ns, bound := release.BoundToSecret(m, h.info.Namespace, h.info.Name, h.info.Version)
	if !bound {
		if !cached && s.Log != nil {
			s.Log.Warnw("release record names another Secret than its own; left out of the list", "namespace", m.GetNamespace(),
				"secret", m.GetName(), "names", h.info.Namespace+"/"+release.SecretName(h.info.Name, h.info.Version))
		}
		return head{}, false
	}
	h.info.Namespace = ns
	return h, true
}

// key names a release across namespaces.
type key struct{ ns, name string }

// latestRecords keeps, of the records' metadata, the latest revision of each release by
// Helm's labels, and every record without them (only its decode tells what it is).
func latestRecords(metas []metav1.Object) []metav1.Object {
	latest := map[key]metav1.Object{}
	version := map[key]int{}
	var unlabelled []metav1.Object
	for _, m := range metas {
		v, err := strconv.Atoi(m.GetLabels()[release.LabelVersion])
		name := m.GetLabels()[release.LabelName]
		if err != nil || name == "" {
			unlabelled = append(unlabelled, m) // not as Helm labels them: decode to know
			continue
		}
		k := key{m.GetNamespace(), name}
		if _, ok := latest[k]; !ok || v > version[k] {
			latest[k], version[k] = m, v
		}
	}
	want := slices.AppendSeq(make([]metav1.Object, 0, len(latest)+len(unlabelled)), maps.Values(latest))
	return append(want, unlabelled...)
}

// limitedMetas are the scope's records: its own list, the index's, or a list of whole records.
func (s *Service) limitedMetas(ctx context.Context, sc scope) ([]metav1.Object, map[types.UID]*release.ListHead, error) {
	var metas []metav1.Object
	bodies := map[types.UID]*release.ListHead{}
	switch {
	case sc.metas != nil:
		for _, m := range sc.metas {
			metas = append(metas, m)
		}
	case s.Index != nil:
		ms, err := s.Index.ReleaseMetas(ctx, sc.namespace)
		if err != nil {
			return nil, nil, err
		}
		for _, m := range ms {
			metas = append(metas, m)
		}
	default:
		heads, err := s.Secrets.ReleaseHeads(ctx, sc.namespace)
		if err != nil {
			return nil, nil, err
		}
		for i := range heads {
			metas = append(metas, &heads[i])
			bodies[heads[i].UID] = &heads[i]
		}
	}
	return metas, bodies, nil
}

// keep replaces the cached heads of the namespaces the list read with fresh.
func (h *heads) keep(sc scope, want []metav1.Object, fresh map[types.UID]head) {
	byNS := map[string]map[types.UID]head{}
	for _, m := range want {
		if hd, ok := fresh[m.GetUID()]; ok {
			if byNS[m.GetNamespace()] == nil {
				byNS[m.GetNamespace()] = map[types.UID]head{}
			}
			byNS[m.GetNamespace()][m.GetUID()] = hd
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	next := make(map[string]map[types.UID]head, len(h.by)+len(byNS))
	for ns, e := range h.by {
		if !sc.may(ns) {
			next[ns] = e
		}
	}
	maps.Copy(next, byNS)
	h.by = next
}

// fetch reads the list heads of missing into bodies: one by one when a namespace has few,
// else with one list of the namespace (of every namespace when the scope is all of them).
func (s *Service) fetch(ctx context.Context, sc scope, missing []metav1.Object, bodies map[types.UID]*release.ListHead) error {
	if len(missing) == 0 {
		return nil
	}
	if sc.allowed == nil && len(missing) > fetchEach {
		return s.listInto(ctx, sc.namespace, bodies)
	}
	byNS := map[string][]metav1.Object{}
	for _, m := range missing {
		if sc.may(m.GetNamespace()) {
			byNS[m.GetNamespace()] = append(byNS[m.GetNamespace()], m)
		}
	}
	for ns, ms := range byNS {
		if len(ms) > fetchEach {
			if err := s.listInto(ctx, ns, bodies); err != nil {
				return err
			}
			continue
		}
		for _, m := range ms {
			h, err := s.Secrets.ReleaseHead(ctx, ns, m.GetName())
			if err != nil {
				return err
			}
			if h != nil && h.UID == m.GetUID() {
				bodies[h.UID] = h
			}
		}
	}
	return nil
}

func (s *Service) listInto(ctx context.Context, namespace string, bodies map[types.UID]*release.ListHead) error {
	heads, err := s.Secrets.ReleaseHeads(ctx, namespace)
	if err != nil {
		return err
	}
	for i := range heads {
		bodies[heads[i].UID] = &heads[i]
	}
	return nil
}
