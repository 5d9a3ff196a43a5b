package yamlsize

import "bytes"

// JSONNodes counts the values of a JSON document by its structural bytes outside strings
// (`{`, `[`, `,`, `:`, one more than their count): a byte scan before a decode allocates a
// map, slice or interface for each (values of tiny maps decode to ~40 times their bytes).
// It stops past limit.
func JSONNodes(raw []byte, limit int64) int64 {
	n := int64(1)
	for i := 0; i < len(raw) && n <= limit; i++ {
		switch raw[i] {
		case '"':
			i += stringEnd(raw[i+1:]) + 1
		case '{', '[', ',', ':':
			n++
		}
	}
	return n
}

// stringEnd is the index in s of the quote that closes a JSON string s starts inside
// (len(s) when none does): the first quote not escaped by an odd run of backslashes.
func stringEnd(s []byte) int {
	for at := 0; ; {
		q := bytes.IndexByte(s[at:], '"')
		if q < 0 {
			return len(s)
		}
		q += at
		bs := 0
		for bs < q && s[q-1-bs] == '\\' {
			bs++
		}
		if bs%2 == 0 {
			return q
		}
		at = q + 1
	}
}
