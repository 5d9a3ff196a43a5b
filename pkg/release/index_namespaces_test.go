package release

import (
	"fmt"
	"sort"
	"testing"
)

// The index names each namespace that holds a release record once, from its release
// index alone: the reader's all-namespaces list reviews and lists only those.
func TestRecordNamespacesNamesEachNamespaceOnce(t *testing.T) {
	s, c, _ := newStore(t)
	for i := 0; i < 6; i++ {
		forgeQueued(t, s, fmt.Sprintf("ns%d", i%3), fmt.Sprintf("r%d", i), "")
	}
	x := running(t)(NewRevisionIndex(c.Metadata()))
	got := x.RecordNamespaces()
	sort.Strings(got)
	if fmt.Sprint(got) != "[ns0 ns1 ns2]" {
		t.Errorf("RecordNamespaces = %v, want [ns0 ns1 ns2]", got)
	}
}
