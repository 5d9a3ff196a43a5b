package release

import (
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/time"
)

// MaxHeadField and MaxHeadDescription cap each string of a list head, kept and answered for
// every release of a namespace whatever the tenant's record holds. A string over its cap is
// cut (descriptions) or dropped (an icon cut would be a broken address).
const (
	MaxHeadField       = 1 << 10
	MaxHeadDescription = 4 << 10
)

// listHead is what a list with limitInfo shows of a record, as Helm's list and the console
// do: decoding only these fields skips the rest of the record unallocated.
type listHead struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Version   int    `json:"version"`
	Info      *struct {
		FirstDeployed time.Time `json:"first_deployed"`
		LastDeployed  time.Time `json:"last_deployed"`
		Deleted       time.Time `json:"deleted"`
		Description   string    `json:"description"`
		Status        string    `json:"status"`
	} `json:"info"`
	Chart *struct {
		Metadata *struct {
			Name        string `json:"name"`
			Version     string `json:"version"`
			AppVersion  string `json:"appVersion"`
			APIVersion  string `json:"apiVersion"`
			Description string `json:"description"`
			Icon        string `json:"icon"`
			Type        string `json:"type"`
			Deprecated  bool   `json:"deprecated"`
		} `json:"metadata"`
	} `json:"chart"`
}

// decodeListHead decodes what a list with limitInfo shows of a record (listHead) through the
// guarded decode, each string capped: a head holds a few KiB whatever the record.
func decodeListHead(data []byte, tenant string) (*helmrelease.Release, error) {
	var h listHead
	if _, err := decode(data, &h, recordBound, tenant); err != nil {
		return nil, err
	}
	field := func(s string) string { return capped(s, MaxHeadField) }
	out := &helmrelease.Release{Name: field(h.Name), Namespace: field(h.Namespace), Version: h.Version}
	if i := h.Info; i != nil {
		out.Info = &helmrelease.Info{FirstDeployed: i.FirstDeployed, LastDeployed: i.LastDeployed, Deleted: i.Deleted,
			Description: capped(i.Description, MaxHeadDescription), Status: helmrelease.Status(field(i.Status))}
	}
	if h.Chart != nil && h.Chart.Metadata != nil {
		m := h.Chart.Metadata
		if len(m.Icon) > MaxHeadField {
			m.Icon = ""
		}
		out.Chart = &chart.Chart{Metadata: &chart.Metadata{Name: field(m.Name), Version: field(m.Version), AppVersion: field(m.AppVersion),
			APIVersion: field(m.APIVersion), Description: capped(m.Description, MaxHeadDescription), Icon: m.Icon, Type: field(m.Type),
			Deprecated: m.Deprecated}}
	}
	return out, nil
}

// capped is s cut to at most n bytes on a rune boundary, in a copy of its own: a cut of
// the decoded string would keep the whole string alive.
func capped(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return strings.Clone(strings.ToValidUTF8(s[:n], ""))
}
