package helmexec

import (
	"errors"
	"reflect"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// An upgrade that reuses values runs only with the values pinned at acceptance, on both
// engines: a deployed record whose values a tenant rewrote after acceptance is refused,
// naming the revision; as it was, it runs with them (under the request's, with reuse).
func TestUpgradeReusesOnlyThePinnedValues(t *testing.T) {
	for name, engine := range map[string]func(*testing.T) (*Factory, *storage.Memory, []Option){"v3": offline, "v4": offlineV4} {
		for _, tc := range []struct {
			name      string
			values    map[string]any
			reuse     bool
			rewritten bool
			want      map[string]any
		}{
			{"no values", nil, false, false, map[string]any{"v": "one", "w": "one"}},
			{"no values, rewritten", nil, false, true, nil},
			{"reuse", map[string]any{"w": "two"}, true, false, map[string]any{"v": "one", "w": "two"}},
			{"reuse, rewritten", map[string]any{"w": "two"}, true, true, nil},
		} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				f, mem, opts := engine(t)
				reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
				if _, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: tiny("1.0.0"),
					Values: map[string]any{"v": "one", "w": "one"}}, opts...); err != nil {
					t.Fatal(err)
				}
				pin, err := release.ValuesPinOf(get(t, mem, "web", 1))
				if err != nil {
					t.Fatal(err)
				}
				if tc.rewritten { // the tenant, after submit accepted the upgrade
					rel := get(t, mem, "web", 1)
					rel.Config = map[string]any{"v": "evil", "w": "evil"}
					if err := mem.Update(release.SecretName("web", 1), rel); err != nil {
						t.Fatal(err)
					}
				}
				reserve(t, mem, "web", 2, helmrelease.StatusPendingUpgrade)
				_, err = f.Upgrade(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2, Chart: tiny("1.0.0"),
					Values: tc.values, ReuseValues: tc.reuse, ValuesPin: pin}, opts...)
				got := get(t, mem, "web", 2)
				if tc.want == nil {
					if !errors.Is(err, release.ErrValuesRewritten) || got.Info.Status == helmrelease.StatusDeployed {
						t.Fatalf("upgrade over rewritten values: %v, revision 2 %s with %v", err, got.Info.Status, got.Config)
					}
					return
				}
				if err != nil || !reflect.DeepEqual(got.Config, tc.want) {
					t.Fatalf("upgrade: %v, revision 2 with %v, want %v", err, got.Config, tc.want)
				}
			})
		}
	}
}
