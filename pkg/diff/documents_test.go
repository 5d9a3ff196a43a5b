package diff

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// manyDocuments is a manifest of tiny documents, as a tenant may write its record's.
func manyDocuments(size int) string {
	var b strings.Builder
	for i := 0; b.Len() < size; i++ {
		fmt.Fprintf(&b, "---\nkind: ConfigMap\napiVersion: v1\nmetadata:\n  name: c%d\n", i)
	}
	return b.String()
}

// A record's manifest of 12 MiB in 208,099 tiny documents (within the guarded decode's
// 16 MiB): the comparison is refused for its documents before it parses them, instead of
// parsing every one (42 s and 2.4 GiB in the caller's render slot, past ctx and MaxTime).
func TestADiffOfAManyDocumentRecordIsRefusedForItsDocuments(t *testing.T) {
	before := manyDocuments(12 << 20)
	after := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n"
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	changes, err := Compute(context.Background(), before, after, "mallory", Options{Context: 3})
	runtime.ReadMemStats(&m1)
	allocated := (m1.TotalAlloc - m0.TotalAlloc) >> 20
	t.Logf("a record manifest of %d MiB, %d documents: %d changes, %v; allocated %d MiB",
		len(before)>>20, strings.Count(before, "---\n"), len(changes), err, allocated)
	if err == nil || !strings.Contains(err.Error(), "documents") || allocated > 64 {
		t.Errorf("Compute = %d changes, %v, %d MiB allocated; want refused for its documents before they are parsed", len(changes), err, allocated)
	}
}

// Parse stops when its context ends, between documents.
func TestParseEndsWithItsContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if objs, err := Parse(ctx, manyDocuments(10<<10), "team"); !errors.Is(err, context.Canceled) {
		t.Errorf("Parse after its context ended = %d objects, %v; want context.Canceled", len(objs), err)
	}
}
