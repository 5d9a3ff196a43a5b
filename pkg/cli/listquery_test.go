package cli

import (
	"strings"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"

	"github.com/async-helm/async-helm/pkg/api"
)

// selectReleases is helm list's selection over submit's latest revisions: the statuses
// (every one without a flag), --filter, the order and the window.
func TestSelectReleases(t *testing.T) {
	at := func(min int) helmtime.Time {
		return helmtime.Time{Time: time.Date(2026, 12, 2, 10, min, 0, 0, time.UTC)}
	}
	rel := func(name, ns string, st helmrelease.Status, min int) api.Release {
		return api.Release{Release: &helmrelease.Release{Name: name, Namespace: ns, Info: &helmrelease.Info{Status: st, LastDeployed: at(min)}}}
	}
	all := []api.Release{
		rel("web", "b", helmrelease.StatusDeployed, 3),
		rel("db", "a", helmrelease.StatusFailed, 1),
		rel("web", "a", helmrelease.StatusPendingUpgrade, 2),
		rel("cache", "a", helmrelease.StatusUninstalling, 5),
		rel("api", "a", helmrelease.StatusPendingInstall, 4),
		rel("old", "a", helmrelease.StatusUninstalled, 0),
		{}, // an entry without a release is never listed
	}
	for _, tc := range []struct {
		name string
		q    listQuery
		want string
	}{
		{"no flag: every status, by name then namespace", listQuery{}, "api/a cache/a db/a old/a web/a web/b"},
		{"-a", listQuery{All: true}, "api/a cache/a db/a old/a web/a web/b"},
		{"--deployed", listQuery{Deployed: true}, "web/b"},
		{"--deployed --failed (helm's default)", listQuery{Deployed: true, Failed: true}, "db/a web/b"},
		{"--pending: install, upgrade and rollback", listQuery{Pending: true}, "api/a web/a"},
		{"--uninstalling --uninstalled", listQuery{Uninstalling: true, Uninstalled: true}, "cache/a old/a"},
		{"-a wins over a status flag", listQuery{All: true, Failed: true}, "api/a cache/a db/a old/a web/a web/b"},
		{"--filter is a regular expression on the name", listQuery{Filter: "^(web|db)$"}, "db/a web/a web/b"},
		{"--filter and a status", listQuery{Filter: "w", Deployed: true}, "web/b"},
		{"-r", listQuery{Reverse: true}, "web/b web/a old/a db/a cache/a api/a"},
		{"-d: oldest first", listQuery{ByDate: true}, "old/a db/a web/a web/b api/a cache/a"},
		{"-d -r: newest first", listQuery{ByDate: true, Reverse: true}, "cache/a api/a web/b web/a db/a old/a"},
		{"--max", listQuery{Max: 2}, "api/a cache/a"},
		{"--max 0 is no limit", listQuery{Max: 0, Pending: true}, "api/a web/a"},
		{"--offset", listQuery{Offset: 4}, "web/a web/b"},
		{"--offset and --max", listQuery{Offset: 1, Max: 2}, "cache/a db/a"},
		{"--offset past the end", listQuery{Offset: 6}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := append([]api.Release(nil), all...)
			got, err := selectReleases(in, tc.q)
			if err != nil {
				t.Fatal(err)
			}
			names := make([]string, 0, len(got))
			for _, r := range got {
				names = append(names, r.Name+"/"+r.Namespace)
			}
			if s := strings.Join(names, " "); s != tc.want {
				t.Errorf("got %q, want %q", s, tc.want)
			}
		})
	}
	if _, err := selectReleases(all, listQuery{Filter: "("}); err == nil || err.Error() != "error parsing regexp: missing closing ): `(`" {
		t.Errorf("a bad filter: %v, want Go's regexp error as helm prints it", err)
	}
}
