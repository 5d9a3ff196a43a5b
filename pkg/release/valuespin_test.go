package release

import (
	"errors"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
)

func TestValuesPinChecksOnlyTheValues(t *testing.T) {
	rev := func(v int, config map[string]any) *helmrelease.Release {
		return &helmrelease.Release{Name: "web", Version: v, Config: config, Manifest: "m", Info: &helmrelease.Info{}}
	}
	pinOf := func(rel *helmrelease.Release) *Pin {
		p, err := ValuesPinOf(rel)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	one := map[string]any{"v": "one"}
	for _, tc := range []struct {
		name string
		pin  *Pin
		rel  *helmrelease.Release
		ok   bool
	}{
		{"same record", pinOf(rev(1, one)), rev(1, one), true},
		{"another revision, same values", pinOf(rev(1, one)), rev(2, map[string]any{"v": "one"}), true},
		{"manifest changed", pinOf(rev(1, one)), &helmrelease.Release{Version: 1, Config: one, Manifest: "other"}, true},
		{"values rewritten", pinOf(rev(1, one)), rev(1, map[string]any{"v": "evil"}), false},
		{"record gone", pinOf(rev(1, one)), nil, false},
		{"none at acceptance, none now", pinOf(nil), nil, true},
		{"none at acceptance, empty now", pinOf(nil), rev(1, nil), true},
		{"none at acceptance, values now", pinOf(nil), rev(1, one), false},
		{"empty at acceptance, values now", pinOf(rev(1, map[string]any{})), rev(1, one), false},
	} {
		err := tc.pin.CheckValues(tc.rel)
		if tc.ok != (err == nil) || (err != nil && !errors.Is(err, ErrValuesRewritten)) {
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
