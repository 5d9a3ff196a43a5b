package cli

import (
	"regexp"
	"slices"
	"sort"

	"github.com/async-helm/async-helm/pkg/api"
)

// listQuery is helm list's selection of the latest revision of each release.
type listQuery struct {
	// All is -a. Without any status flag every status is listed, as with -a: an action
	// stays pending for a while after its 201 (helm's default is deployed and failed).
	All, Deployed, Failed, Pending, Uninstalling, Uninstalled bool
	// Filter is a regular expression the name must match (helm's --filter).
	Filter string
	// ByDate (-d) sorts by last deployment, oldest first; Reverse (-r) turns the order.
	ByDate, Reverse bool
	// Max (-m; 0: no limit) and Offset (--offset) cut the sorted list.
	Max, Offset int
}

// statuses is the set of statuses q lists; nil is every status.
func (q listQuery) statuses() map[string]bool {
	if q.All {
		return nil
	}
	set := map[string]bool{}
	for status, on := range map[string]bool{"deployed": q.Deployed, "failed": q.Failed, "uninstalling": q.Uninstalling,
		"uninstalled": q.Uninstalled, "pending-install": q.Pending, "pending-upgrade": q.Pending, "pending-rollback": q.Pending} {
		if on {
			set[status] = true
		}
	}
	if len(set) == 0 {
		return nil
	}
	return set
}

// compile checks the filter as helm's list does (Go's regexp, helm's wording).
func (q listQuery) compile() (*regexp.Regexp, error) {
	if q.Filter == "" {
		return nil, nil
	}
	return regexp.Compile(q.Filter)
}

// selectReleases is helm's List.Run: filter by name, then status, sort, then the window.
func selectReleases(rels []api.Release, q listQuery) ([]api.Release, error) {
	filter, err := q.compile()
	if err != nil {
		return nil, err
	}
	want := q.statuses()
	out := make([]api.Release, 0, len(rels))
	for _, r := range rels {
		if r.Release == nil || (filter != nil && !filter.MatchString(r.Name)) {
			continue
		}
		if want != nil && (r.Info == nil || !want[r.Info.Status.String()]) {
			continue
		}
		out = append(out, r)
	}
	sortReleases(out, q)
	if q.Offset >= len(out) {
		return []api.Release{}, nil
	}
	end := len(out)
	if q.Max > 0 && q.Offset+q.Max < end {
		end = q.Offset + q.Max
	}
	return out[q.Offset:end], nil
}

// sortReleases is helm's order: by name (then namespace across namespaces), by date with
// -d (helm's SortByDate: by the second of the last deployment, oldest first), -r reversed.
func sortReleases(rels []api.Release, q listQuery) {
	less := func(a, b api.Release) bool {
		if a.Name != b.Name {
			return a.Name < b.Name
		}
		return a.Namespace < b.Namespace
	}
	if q.ByDate {
		less = func(a, b api.Release) bool { return deployedUnix(a) < deployedUnix(b) }
	}
	sort.SliceStable(rels, func(i, j int) bool { return less(rels[i], rels[j]) })
	if q.Reverse {
		slices.Reverse(rels)
	}
}

func deployedUnix(r api.Release) int64 {
	if r.Info == nil {
		return 0
	}
	return r.Info.LastDeployed.Unix()
}
