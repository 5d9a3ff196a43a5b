package repos

import "time"

// The credentials cache's bounds: the CA bundles, certificates and passwords read from one
// namespace, and from all. A ConfigMap holds at most 1 MiB, so any one value fits. Each
// entry also costs credsEntryBytes, which bounds the entries of empty values.
const (
	credsPerNamespace = 4 << 20
	credsTotal        = 32 << 20
	credsEntryBytes   = 256
)

// credsEntry is one key of a ConfigMap or Secret a repository names, kept in a
// tenantLRU charged to its namespace.
type credsEntry struct {
	value []byte
	err   error
	at    time.Time
}

func newCredsCache() *tenantLRU[credsEntry] {
	return newTenantLRU[credsEntry](credsTotal, credsPerNamespace, 0)
}
