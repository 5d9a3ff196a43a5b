package valuesfrom

import (
	"context"
	"errors"
	"runtime"
	"strings"
	"testing"
)

type mapReader map[string]map[string][]byte

func (m mapReader) Data(_ context.Context, _, _, name string) (map[string][]byte, bool, error) {
	d, ok := m[name]
	return d, ok, nil
}

// Two ConfigMap keys of 498 KiB of `x: [{a: }, …]` (within MaxKeyBytes and MaxTotalBytes)
// held 57 MiB per read (284 MiB allocated): values_from is bounded in YAML nodes as in
// bytes, before anything parses them.
func TestValuesFromIsBoundedInWhatItDecodesTo(t *testing.T) {
	key := []byte("x: [" + strings.Repeat("{a: },", 85_000) + "]\n") // ~498 KiB, within MaxKeyBytes
	other := []byte("y" + string(key[1:]))
	r := mapReader{"a": {"values.yaml": key}, "b": {"values.yaml": other}}
	refs := []Ref{{Kind: KindConfigMap, Name: "a"}, {Kind: KindConfigMap, Name: "b"}}
	runtime.GC()
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	vals, err := Load(context.Background(), r, "mallory", refs)
	runtime.ReadMemStats(&after)
	runtime.GC()
	var held runtime.MemStats
	runtime.ReadMemStats(&held)
	runtime.KeepAlive(vals)
	t.Logf("two ConfigMap keys of %d KiB (%d KiB in all, bound %d KiB): Load %v; allocated %d MiB, held %d MiB after GC",
		len(key)>>10, 2*len(key)>>10, MaxTotalBytes>>10, err, (after.TotalAlloc-before.TotalAlloc)>>20,
		(int64(held.HeapAlloc)-int64(before.HeapAlloc))>>20)
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "YAML nodes") || after.TotalAlloc-before.TotalAlloc > 16<<20 {
		t.Errorf("values_from within its byte bounds: %v, %d MiB allocated; want refused for its nodes before they are parsed",
			err, (after.TotalAlloc-before.TotalAlloc)>>20)
	}
}
