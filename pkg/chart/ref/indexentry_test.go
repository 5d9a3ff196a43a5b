package ref

import "testing"

// IndexEntry and SplitIndexEntry are each other's inverse, a "--" in the chart's own name
// included (the repository's name is what follows the last "--").
func TestIndexEntryRoundTrip(t *testing.T) {
	for _, c := range [][2]string{{"tiny", "test"}, {"my--chart", "repo"}, {"gitlab", "openshift-helm-charts"}} {
		e := IndexEntry(c[0], c[1])
		name, repo, err := SplitIndexEntry(e)
		if err != nil || name != c[0] || repo != c[1] {
			t.Errorf("%q: %q %q %v", e, name, repo, err)
		}
	}
}
