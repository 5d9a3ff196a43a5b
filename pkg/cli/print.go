package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/cli/output"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// Accepted is what install and upgrade print at once.
type Accepted struct {
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
	Revision   int    `json:"revision"`
	Status     string `json:"status"`
	SecretName string `json:"secret"`
	SecretUID  string `json:"uid"`
}

func printAccepted(w io.Writer, format string, sec *corev1.Secret) error {
	rev, _ := strconv.Atoi(sec.Labels["version"])
	a := Accepted{Name: sec.Labels["name"], Namespace: sec.Namespace, Revision: rev, Status: sec.Labels["status"],
		SecretName: sec.Name, SecretUID: string(sec.UID)}
	if format != "table" {
		return encode(w, format, a)
	}
	_, err := fmt.Fprintf(w, "NAME: %s\nNAMESPACE: %s\nREVISION: %d\nSTATUS: %s\nRELEASE SECRET: %s\nSECRET UID: %s\n",
		a.Name, a.Namespace, a.Revision, a.Status, a.SecretName, a.SecretUID)
	return err
}

// listElement is a row of `helm list -o json`, field for field.
type listElement struct {
	Name       string `json:"name"`
	Namespace  string `json:"namespace"`
	Revision   string `json:"revision"`
	Updated    string `json:"updated"`
	Status     string `json:"status"`
	Chart      string `json:"chart"`
	AppVersion string `json:"app_version"`
	// Queue: no executor has started the pending revision yet (async-helm's, not Helm's).
	Queue *api.Queue `json:"queue,omitempty"`
}

// chartColumns are helm's formatChartName and formatAppVersion.
func chartColumns(c *chart.Chart) (name, appVersion string) {
	if c == nil || c.Metadata == nil {
		return "MISSING", "MISSING"
	}
	return c.Name() + "-" + c.Metadata.Version, c.AppVersion()
}

// element is r as helm's list prints it: updated in timeFormat ("": time.Time's String).
func element(r *helmrelease.Release, timeFormat string) listElement {
	e := listElement{Name: r.Name, Namespace: r.Namespace, Revision: strconv.Itoa(r.Version), Updated: "-"}
	e.Chart, e.AppVersion = chartColumns(r.Chart)
	if r.Info != nil {
		e.Status = r.Info.Status.String()
		switch t := r.Info.LastDeployed; {
		case t.IsZero():
		case timeFormat != "":
			e.Updated = t.Format(timeFormat)
		default:
			e.Updated = t.String()
		}
	}
	return e
}

// listPrint is how list prints: helm's --time-format, --no-headers and -q.
type listPrint struct {
	TimeFormat string
	NoHeaders  bool
	Short      bool
}

// releaseList is helm's releaseListWriter, with the queue of the revisions not started.
type releaseList struct {
	rows []listElement
	listPrint
}

func newReleaseList(rels []api.Release, p listPrint) releaseList {
	rows := make([]listElement, 0, len(rels))
	for _, r := range rels {
		if r.Release == nil {
			continue
		}
		e := element(r.Release, p.TimeFormat)
		if release.IsPending(e.Status) {
			e.Queue = r.Queue
		}
		rows = append(rows, e)
	}
	return releaseList{rows: rows, listPrint: p}
}

func (l releaseList) WriteTable(w io.Writer) error {
	if l.Short {
		for _, e := range l.rows {
			if _, err := fmt.Fprintln(w, e.Name); err != nil {
				return err
			}
		}
		return nil
	}
	t := newTable()
	if !l.NoHeaders {
		t.AddRow("NAME", "NAMESPACE", "REVISION", "UPDATED", "STATUS", "CHART", "APP VERSION")
	}
	for _, e := range l.rows {
		st := e.Status
		if e.Queue != nil {
			st += " (" + queueShort(e.Queue) + ")"
		}
		t.AddRow(e.Name, e.Namespace, e.Revision, e.Updated, st, e.Chart, e.AppVersion)
	}
	return output.EncodeTable(w, t.Table)
}

func (l releaseList) WriteJSON(w io.Writer) error { return output.EncodeJSON(w, l.data()) }

func (l releaseList) WriteYAML(w io.Writer) error { return output.EncodeYAML(w, l.data()) }

// data is what json and yaml print: the rows, or with -q the names only.
func (l releaseList) data() any {
	if !l.Short {
		return l.rows
	}
	names := make([]string, 0, len(l.rows))
	for _, e := range l.rows {
		names = append(names, e.Name)
	}
	return names
}

// historyElement is a row of `helm history -o json`, field for field.
type historyElement struct {
	Revision    int           `json:"revision"`
	Updated     helmtime.Time `json:"updated"`
	Status      string        `json:"status"`
	Chart       string        `json:"chart"`
	AppVersion  string        `json:"app_version"`
	Description string        `json:"description"`
}

// releaseHistory is helm's: the rows oldest first.
type releaseHistory []historyElement

func (h releaseHistory) WriteJSON(w io.Writer) error { return output.EncodeJSON(w, h) }

func (h releaseHistory) WriteYAML(w io.Writer) error { return output.EncodeYAML(w, h) }

func (h releaseHistory) WriteTable(w io.Writer) error {
	t := newTable("REVISION", "UPDATED", "STATUS", "CHART", "APP VERSION", "DESCRIPTION")
	for _, e := range h {
		t.AddRow(e.Revision, e.Updated.Format(time.ANSIC), e.Status, e.Chart, e.AppVersion, e.Description)
	}
	return output.EncodeTable(w, t.Table)
}

// newHistory is helm's getHistory: the newest revisions (newest <= 0: none), oldest first.
func newHistory(rels []*helmrelease.Release, newest int) releaseHistory {
	sorted := append([]*helmrelease.Release(nil), rels...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Version < sorted[j].Version })
	newest = max(newest, 0)
	if len(sorted) > newest {
		sorted = sorted[len(sorted)-newest:]
	}
	rows := make(releaseHistory, 0, len(sorted))
	for _, r := range sorted {
		h := historyElement{Revision: r.Version}
		h.Chart, h.AppVersion = chartColumns(r.Chart)
		if r.Info != nil {
			h.Status, h.Updated, h.Description = r.Info.Status.String(), r.Info.LastDeployed, r.Info.Description
		}
		rows = append(rows, h)
	}
	return rows
}

func encode(w io.Writer, format string, v any) error {
	if format == "yaml" {
		return output.EncodeYAML(w, v)
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
