package release

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
)

// headStrings is the bytes of every string a list head keeps.
func headStrings(r *helmrelease.Release) int {
	n := len(r.Name) + len(r.Namespace)
	if r.Info != nil {
		n += len(r.Info.Description) + len(r.Info.Status) + len(r.Info.Notes)
	}
	if r.Chart != nil && r.Chart.Metadata != nil {
		m := r.Chart.Metadata
		n += len(m.Name) + len(m.Version) + len(m.AppVersion) + len(m.APIVersion) + len(m.Description) + len(m.Icon) + len(m.Type)
		for k, v := range m.Annotations {
			n += len(k) + len(v)
		}
		for _, k := range m.Keywords {
			n += len(k)
		}
	}
	return n
}

// A tenant's record within MaxRecordBytes carries megabytes of notes, descriptions,
// annotations and keywords: the list's head of it keeps a few KiB, and what a list shows.
func TestDecodeListHeadKeepsAFewKiBOfAHostileRecord(t *testing.T) {
	big := strings.Repeat("a", 2<<20)
	rls := &helmrelease.Release{Name: "r", Namespace: "tenant", Version: 3,
		Info: &helmrelease.Info{Status: helmrelease.StatusDeployed, Notes: big, Description: big + "é"},
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "0.1.0", AppVersion: "1.0", APIVersion: "v2",
			Description: big, Icon: "data:image/png;base64," + big, Annotations: map[string]string{"a": big}, Keywords: []string{big}}}}
	payload, err := EncodeRelease(rls)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeListHead(payload, "")
	if err != nil {
		t.Fatal(err)
	}
	held := headStrings(got)
	t.Logf("record payload %d KiB (%d MiB of strings); the head keeps %d bytes of strings", len(payload)>>10, 6*len(big)>>20, held)
	if held > 2*MaxHeadDescription+8*MaxHeadField {
		t.Errorf("the list head of a %d KiB record keeps %d bytes of the tenant's strings", len(payload)>>10, held)
	}
	m := got.Chart.Metadata
	if got.Name != "r" || got.Namespace != "tenant" || got.Version != 3 || got.Info.Status != helmrelease.StatusDeployed ||
		m.Name != "tiny" || m.Version != "0.1.0" || m.AppVersion != "1.0" || m.APIVersion != "v2" {
		t.Errorf("the head lost what a list shows: %+v %+v %+v", got, got.Info, m)
	}
	if len(got.Info.Description) != MaxHeadDescription || m.Icon != "" || got.Info.Notes != "" {
		t.Errorf("description %d bytes (want %d, cut), icon %d bytes (want dropped), notes %d bytes (want none)",
			len(got.Info.Description), MaxHeadDescription, len(m.Icon), len(got.Info.Notes))
	}
}

// A cut never splits a rune: the answer is valid UTF-8.
func TestCappedCutsOnARuneBoundary(t *testing.T) {
	for _, c := range []struct {
		in   string
		n    int
		want string
	}{{"abc", 5, "abc"}, {"abc", 2, "ab"}, {"aé", 2, "a"}, {"aéb", 3, "aé"}} {
		if got := capped(c.in, c.n); got != c.want {
			t.Errorf("capped(%q, %d) = %q, want %q", c.in, c.n, got, c.want)
		}
	}
}
