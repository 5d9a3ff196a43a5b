package release

import (
	"errors"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
)

// A rollback pin covers the record's apply method; a record without one digests as it did
// before apply methods were covered (the digest below is the one of the code without them).
func TestRollbackPinCoversTheApplyMethod(t *testing.T) {
	rel := &helmrelease.Release{Name: "web", Version: 1, Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "1.0.0"}},
		Config: map[string]any{"v": "one"}, Manifest: "kind: ConfigMap\n", Info: &helmrelease.Info{Notes: "hi"}}
	if d, err := RecordDigest(rel, ""); err != nil || d != "sha256:1761e665a558fda2fef4235a3bd752524883eefe8ad02d0701187b9fbafae16e" {
		t.Errorf("a record without apply method digests %s, %v", d, err)
	}
	pin, err := PinOf(rel, "csa")
	if err != nil {
		t.Fatal(err)
	}
	if err := pin.Check(rel, "csa"); err != nil {
		t.Errorf("the pinned record: %v", err)
	}
	for _, m := range []string{"ssa", ""} {
		if err := pin.Check(rel, m); !errors.Is(err, ErrTargetRewritten) {
			t.Errorf("apply method rewritten to %q: %v", m, err)
		}
	}
}
