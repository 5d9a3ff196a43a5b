package auth

import (
	"crypto/sha256"
	"encoding/binary"
	"slices"
)

// cacheKey is the whole identity (name, uid, groups, extra) and the permission: two tokens
// of one user differ in their extra (OpenShift's scopes, a bound token's pod), and a scoped
// token must not reuse what the full token was allowed. Every string and list is written
// after its length, so no two identities write the same bytes, and the extra's keys are
// sorted. It runs on every request to 201: no reflection, one buffer.
func cacheKey(u *User, n Need) [32]byte {
	b := make([]byte, 0, 256)
	b = appendString(b, u.Name)
	b = appendString(b, u.UID)
	b = appendList(b, u.Groups)
	keys := make([]string, 0, len(u.Extra))
	for k := range u.Extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b = binary.AppendUvarint(b, uint64(len(keys)))
	for _, k := range keys {
		b = appendList(appendString(b, k), u.Extra[k])
	}
	for _, s := range []string{n.Verb, n.Resource, n.Namespace, n.Name} {
		b = appendString(b, s)
	}
	return sha256.Sum256(b)
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

func appendList(b []byte, l []string) []byte {
	b = binary.AppendUvarint(b, uint64(len(l)))
	for _, s := range l {
		b = appendString(b, s)
	}
	return b
}
