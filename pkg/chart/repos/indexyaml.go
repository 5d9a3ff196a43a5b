package repos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"golang.org/x/sync/singleflight"
	"sigs.k8s.io/yaml"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
	"github.com/async-helm/async-helm/pkg/fairqueue"
)

// ErrIndexTooLarge is a merged index over the bounds of its encoding (422 at the edge:
// errors.Is(err, chartsource.ErrTooLarge) holds too).
var ErrIndexTooLarge = errors.New("the merged chart index is too large to serve")

// encodings are the merged indexes encoded, by version (every repository merged and the
// index cached for it): namespaces that see the same repositories share one encoding.
type encodings struct {
	maxCost, maxBytes int64

	flights singleflight.Group
	slot    *fairqueue.Queue // one encoding at a time, fairly between tenants
	// answers are charged to the caller and namespace that encoded them, half the budget each.
	answers *tenantLRU[encoded]
	mu      sync.Mutex
	// encodes counts the encodings run; during, when set, runs in the slot (tests).
	encodes int
	during  func(fairqueue.Flow)
}

type encoded struct {
	yaml []byte
	err  error
}

func newEncodings() *encodings {
	return &encodings{maxCost: bounds.MaxMergedIndexCost, maxBytes: bounds.MaxIndexYAMLBytes,
		slot: fairqueue.New(1, fairqueue.Options{}), answers: newTenantLRU[encoded](bounds.IndexYAMLCacheBytes, bounds.IndexYAMLCacheBytes/2, 1024)}
}

// IndexOptions are one request of the merged index.yaml.
type IndexOptions struct {
	OnlyCompatible bool // leave out charts whose kubeVersion the cluster does not meet
	// Admit is asked only when no answer is kept: the caller pays its rate for what costs.
	Admit func() error
}

// IndexYAML is Index encoded for the console's index.yaml route, once per version, by the
// tenant that asked first; ErrIndexTooLarge past MaxMergedIndexCost or MaxIndexYAMLBytes.
func (s *Set) IndexYAML(ctx context.Context, namespace string, opts IndexOptions) ([]byte, error) {
	parts, err := s.parts(ctx, namespace)
	if err != nil {
		return nil, err
	}
	e := s.yamlCache()
	key := versionOf(parts, opts.OnlyCompatible)
	if got, ok := e.answers.get(key); ok {
		return got.yaml, got.err
	}
	if opts.Admit != nil {
		if err := opts.Admit(); err != nil {
			return nil, err
		}
	}
	onlyCompatible := opts.OnlyCompatible
	t := chartsource.TenantOf(ctx, namespace)
	flow := fairqueue.Flow{Namespace: t.Namespace, Caller: t.Caller}
	flight := context.WithoutCancel(ctx) // the flight's, not the first request's
	ch := e.flights.DoChan(key, func() (any, error) {
		got := e.tooCostly(parts)
		if got == nil {
			got = e.encode(flight, flow, func() *encoded { return s.encodeMerged(e, parts, onlyCompatible) })
		}
		e.answers.put(key, *got, int64(len(got.yaml)), true, "caller/"+flow.Caller, "namespace/"+flow.Namespace)
		return *got, nil
	})
	select {
	case res := <-ch:
		got := res.Val.(encoded)
		return got.yaml, got.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// tooCostly refuses parts whose indexes hold more than e.maxCost (nil: within it).
func (e *encodings) tooCostly(parts []part) *encoded {
	var cost int64
	for _, p := range parts {
		if p.f.err == nil {
			cost += p.f.cost
		}
	}
	if cost <= e.maxCost {
		return nil
	}
	return &encoded{err: fmt.Errorf("%w: its indexes hold about %d MiB parsed, over %d MiB (%w)",
		ErrIndexTooLarge, cost>>20, e.maxCost>>20, chartsource.ErrTooLarge)}
}

// encodeMerged merges and encodes parts within e.maxBytes.
func (s *Set) encodeMerged(e *encodings, parts []part, onlyCompatible bool) *encoded {
	idx, err := s.merge(parts, onlyCompatible)
	if err != nil {
		return &encoded{err: err}
	}
	b, err := yaml.Marshal(idx)
	switch {
	case err != nil:
		return &encoded{err: fmt.Errorf("encode index: %w", err)}
	case int64(len(b)) > e.maxBytes:
		return &encoded{err: fmt.Errorf("%w: it encodes to %d MiB, over %d MiB (%w)",
			ErrIndexTooLarge, len(b)>>20, e.maxBytes>>20, chartsource.ErrTooLarge)}
	}
	return &encoded{yaml: b}
}

// versionOf names the merged index of parts (a new fetch is a new *fetched).
func versionOf(parts []part, onlyCompatible bool) string {
	var b strings.Builder
	b.WriteString(strconv.FormatBool(onlyCompatible))
	for _, p := range parts {
		fmt.Fprintf(&b, "|%s|%s|%p", p.r.Name, p.r.cacheKey(), p.f)
	}
	return b.String()
}

// encode runs fn in e's one encoding slot, taken in flow's turn.
func (e *encodings) encode(ctx context.Context, flow fairqueue.Flow, fn func() *encoded) *encoded {
	seat, err := e.slot.Acquire(ctx, flow)
	if err != nil {
		return &encoded{err: fmt.Errorf("encode index: no encoding slot: %w", err)}
	}
	defer seat.Release()
	e.mu.Lock()
	e.encodes++
	during := e.during
	e.mu.Unlock()
	if during != nil {
		during(flow)
	}
	return fn()
}

// yamlCache is the Set's encodings, made on first use.
func (s *Set) yamlCache() *encodings {
	s.encodedOnce.Do(func() { s.encoded = newEncodings() })
	return s.encoded
}
