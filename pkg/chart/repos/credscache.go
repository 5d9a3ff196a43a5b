package repos

import (
	"sync"
	"time"

	"k8s.io/utils/lru"
)

// The credentials cache's bounds: the CA bundles, certificates and passwords read from one
// namespace, and from all. A ConfigMap holds at most 1 MiB, so any one value fits.
const (
	credsPerNamespace = 4 << 20
	credsTotal        = 32 << 20
	// credsKeysPerNamespace and credsNamespaces bound the entries of empty values.
	credsKeysPerNamespace = 256
	credsNamespaces       = 1024
)

type credsEntry struct {
	value []byte
	err   error
	at    time.Time
}

// credsCache keeps what was read of the ConfigMaps and Secrets repositories name, least
// recently used out first: a namespace's past perNamespace bytes, whole namespaces past total.
type credsCache struct {
	perNamespace, total int64

	mu    sync.Mutex
	byNS  *lru.Cache // namespace -> *nsCreds
	bytes int64
}

type nsCreds struct {
	keys  *lru.Cache // kind/name/key -> credsEntry
	bytes int64
}

func newCredsCache(perNamespace, total int64) *credsCache {
	c := &credsCache{perNamespace: perNamespace, total: total}
	c.byNS = lru.NewWithEvictionFunc(credsNamespaces, func(_ lru.Key, v any) { c.bytes -= v.(*nsCreds).bytes })
	return c
}

func (c *credsCache) get(namespace, key string) (credsEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	n, ok := c.byNS.Get(namespace)
	if !ok {
		return credsEntry{}, false
	}
	e, ok := n.(*nsCreds).keys.Get(key)
	if !ok {
		return credsEntry{}, false
	}
	return e.(credsEntry), true
}

// put keeps e as key's entry of namespace within the bounds.
func (c *credsCache) put(namespace, key string, e credsEntry) {
	size := int64(len(key) + len(e.value))
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.namespace(namespace)
	n.keys.Remove(key)
	if size > c.perNamespace {
		return
	}
	for n.bytes+size > c.perNamespace && n.keys.Len() > 0 {
		n.keys.RemoveOldest()
	}
	n.keys.Add(key, e)
	n.bytes += size
	c.bytes += size
	for c.bytes > c.total && c.byNS.Len() > 1 {
		c.byNS.RemoveOldest()
	}
}

// namespace is namespace's entries, made if need be, marked used.
func (c *credsCache) namespace(namespace string) *nsCreds {
	if n, ok := c.byNS.Get(namespace); ok {
		return n.(*nsCreds)
	}
	n := &nsCreds{}
	n.keys = lru.NewWithEvictionFunc(credsKeysPerNamespace, func(k lru.Key, v any) {
		size := int64(len(k.(string)) + len(v.(credsEntry).value))
		n.bytes -= size
		c.bytes -= size
	})
	c.byNS.Add(namespace, n)
	return n
}
