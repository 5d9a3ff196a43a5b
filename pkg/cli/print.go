package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release"
)

func checkOutput(o string) error {
	switch o {
	case "table", "json", "yaml":
		return nil
	}
	return fmt.Errorf("output format %q: want table, json or yaml", o)
}

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

// helmTime is how helm's list prints times.
const helmTime = "2006-01-02 15:04:05.999999999 -0700 MST"

// ansic is how helm's status and history tables print times (time.ANSIC; empty when unset).
func ansic(t helmtime.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.Format(time.ANSIC)
}

func element(r *helmrelease.Release) listElement {
	e := listElement{Name: r.Name, Namespace: r.Namespace, Revision: strconv.Itoa(r.Version)}
	if r.Info != nil {
		e.Status = r.Info.Status.String()
		if !r.Info.LastDeployed.IsZero() {
			e.Updated = r.Info.LastDeployed.Format(helmTime)
		}
	}
	if r.Chart != nil && r.Chart.Metadata != nil {
		e.Chart = r.Chart.Metadata.Name + "-" + r.Chart.Metadata.Version
		e.AppVersion = r.Chart.Metadata.AppVersion
	}
	return e
}

func printList(w io.Writer, format string, rels []*helmrelease.Release) error {
	all := make([]api.Release, 0, len(rels))
	for _, r := range rels {
		all = append(all, api.Release{Release: r})
	}
	return printReleases(w, format, all)
}

// printReleases is the list with the queue of the revisions no executor has started: its
// own field in json and yaml, beside the status in the table (queueShort).
func printReleases(w io.Writer, format string, rels []api.Release) error {
	rows := make([]listElement, 0, len(rels))
	for _, r := range rels {
		if r.Release == nil {
			continue
		}
		e := element(r.Release)
		if release.IsPending(e.Status) {
			e.Queue = r.Queue
		}
		rows = append(rows, e)
	}
	if format != "table" {
		return encode(w, format, rows)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "NAME\tNAMESPACE\tREVISION\tUPDATED\tSTATUS\tCHART\tAPP VERSION")
	for _, e := range rows {
		st := e.Status
		if e.Queue != nil {
			st += " (" + queueShort(e.Queue) + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", e.Name, e.Namespace, e.Revision, e.Updated, st, e.Chart, e.AppVersion)
	}
	return tw.Flush()
}

// historyElement is a row of `helm history -o json`, field for field: helm prints
// updated as a time there, and as time.ANSIC in the table.
type historyElement struct {
	Revision    int           `json:"revision"`
	Updated     helmtime.Time `json:"updated"`
	Status      string        `json:"status"`
	Chart       string        `json:"chart"`
	AppVersion  string        `json:"app_version"`
	Description string        `json:"description"`
}

func printHistory(w io.Writer, format string, rels []*helmrelease.Release) error {
	rows := make([]historyElement, 0, len(rels))
	for _, r := range rels {
		e := element(r)
		h := historyElement{Revision: r.Version, Status: e.Status, Chart: e.Chart, AppVersion: e.AppVersion}
		if r.Info != nil {
			h.Updated, h.Description = r.Info.LastDeployed, r.Info.Description
		}
		rows = append(rows, h)
	}
	if format != "table" {
		return encode(w, format, rows)
	}
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	fmt.Fprintln(tw, "REVISION\tUPDATED\tSTATUS\tCHART\tAPP VERSION\tDESCRIPTION")
	for _, h := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\n", h.Revision, ansic(h.Updated), h.Status, h.Chart, h.AppVersion, h.Description)
	}
	return tw.Flush()
}

// statusElement is what `status -o json|yaml` prints.
type statusElement struct {
	listElement
	Description string `json:"description"`
	// Progress is what a pending revision is doing now (absent once it is final).
	Progress *progress.Progress `json:"progress,omitempty"`
}

func printStatus(w io.Writer, format string, r *helmrelease.Release, p *progress.Progress) error {
	return printReleaseStatus(w, format, &api.Release{Release: r, Progress: p})
}

// printReleaseStatus is status: Helm's fields, then the queue of a revision no executor has
// started or the progress of one that runs.
func printReleaseStatus(w io.Writer, format string, rel *api.Release) error {
	r := rel.Release
	s := statusElement{listElement: element(r)}
	if r.Info != nil {
		s.Description = r.Info.Description
	}
	if release.IsPending(s.Status) {
		s.Progress, s.Queue = rel.Progress, rel.Queue
	}
	if format != "table" {
		return encode(w, format, s)
	}
	deployed := ""
	if r.Info != nil {
		deployed = ansic(r.Info.LastDeployed)
	}
	if _, err := fmt.Fprintf(w, "NAME: %s\nLAST DEPLOYED: %s\nNAMESPACE: %s\nSTATUS: %s\nREVISION: %s\nCHART: %s\nDESCRIPTION: %s\n",
		s.Name, deployed, s.Namespace, s.Status, s.Revision, s.Chart, s.Description); err != nil {
		return err
	}
	if s.Queue != nil {
		if _, err := fmt.Fprintf(w, "QUEUED: %s\n", queueWords(s.Queue)); err != nil {
			return err
		}
	}
	return printProgress(w, s.Progress)
}

// printProgress is the status's progress block: what the pending action is doing, its
// latest warnings (newest first) and when the executor last recorded it.
func printProgress(w io.Writer, p *progress.Progress) error {
	if p == nil {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "PHASE: %s\nREADY: %d/%d\n", p.Phase, p.Ready, p.Total)
	if len(p.WaitingFor) > 0 {
		fmt.Fprintf(&b, "WAITING FOR: %s\n", strings.Join(p.WaitingFor, ", "))
	}
	if p.Hook != "" {
		fmt.Fprintf(&b, "HOOK: %s\n", p.Hook)
	}
	if len(p.Warnings) > 0 {
		b.WriteString("WARNINGS:\n")
		for _, m := range p.Warnings {
			fmt.Fprintf(&b, "  %s\n", m)
		}
	}
	if !p.Updated.IsZero() {
		fmt.Fprintf(&b, "PROGRESS UPDATED: %s\n", p.Updated.Format(helmTime))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func encode(w io.Writer, format string, v any) error {
	if format == "yaml" {
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
