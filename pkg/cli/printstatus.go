package cli

import (
	"fmt"
	"io"
	"strings"
	"time"

	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli/output"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release"
)

// statusShow is what the status block shows beyond helm status's own lines (get all's).
type statusShow struct {
	Description bool
	Metadata    bool
	Debug       bool
}

// statusPrinter is helm's (json and yaml without the chart), with a pending revision's progress.
type statusPrinter struct {
	rel  api.Release
	show statusShow
}

// newStatusPrinter prints rel (the queue and progress of a pending revision only).
func newStatusPrinter(rel api.Release, show statusShow) statusPrinter {
	if rel.Info == nil || !release.IsPending(rel.Info.Status.String()) {
		rel.Progress, rel.Queue = nil, nil
	}
	return statusPrinter{rel: rel, show: show}
}

func (s statusPrinter) data() api.Release {
	out := s.rel
	stripped := *s.rel.Release
	stripped.Chart = nil
	out.Release = &stripped
	return out
}

func (s statusPrinter) WriteJSON(w io.Writer) error { return output.EncodeJSON(w, s.data()) }

func (s statusPrinter) WriteYAML(w io.Writer) error { return output.EncodeYAML(w, s.data()) }

// WriteTable is helm's statusPrinter.WriteTable (v3.21) with async-helm's lines.
func (s statusPrinter) WriteTable(w io.Writer) error {
	r := s.rel.Release
	info := r.Info
	if info == nil {
		info = &helmrelease.Info{}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "NAME: %s\n", r.Name)
	if !info.LastDeployed.IsZero() {
		fmt.Fprintf(&b, "LAST DEPLOYED: %s\n", info.LastDeployed.Format(time.ANSIC))
	}
	fmt.Fprintf(&b, "NAMESPACE: %s\nSTATUS: %s\nREVISION: %d\n", r.Namespace, escapeLine(info.Status.String()), r.Version)
	if s.show.Metadata && r.Chart != nil && r.Chart.Metadata != nil {
		m := r.Chart.Metadata
		fmt.Fprintf(&b, "CHART: %s\nVERSION: %s\nAPP_VERSION: %s\n", escapeLine(m.Name), escapeLine(m.Version), escapeLine(m.AppVersion))
	}
	if s.show.Description { // multi-line as helm prints it
		fmt.Fprintf(&b, "DESCRIPTION: %s\n", escapeText(info.Description))
	}
	if s.rel.Queue != nil {
		fmt.Fprintf(&b, "QUEUED: %s\n", queueWords(s.rel.Queue))
	}
	writeProgress(&b, s.rel.Progress)
	writeTestSuite(&b, r)
	if s.show.Debug {
		if err := writeValuesAndManifest(&b, r); err != nil {
			return err
		}
	}
	if len(info.Notes) > 0 {
		fmt.Fprintf(&b, "NOTES:\n%s\n", strings.TrimSpace(info.Notes))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeTestSuite is helm's TEST SUITE block: the test hooks that have run.
func writeTestSuite(b *strings.Builder, r *helmrelease.Release) {
	var tests []*helmrelease.Hook
	for _, h := range r.Hooks {
		for _, e := range h.Events {
			if e == helmrelease.HookTest {
				tests = append(tests, h)
			}
		}
	}
	if len(tests) == 0 {
		b.WriteString("TEST SUITE: None\n")
		return
	}
	for _, h := range tests {
		if h.LastRun.StartedAt.IsZero() {
			continue
		}
		fmt.Fprintf(b, "TEST SUITE:     %s\nLast Started:   %s\nLast Completed: %s\nPhase:          %s\n",
			h.Name, h.LastRun.StartedAt.Format(time.ANSIC), h.LastRun.CompletedAt.Format(time.ANSIC), h.LastRun.Phase)
	}
}

// writeValuesAndManifest is helm's --debug block (get all).
func writeValuesAndManifest(b *strings.Builder, r *helmrelease.Release) error {
	b.WriteString("USER-SUPPLIED VALUES:\n")
	if err := output.EncodeYAML(b, r.Config); err != nil {
		return err
	}
	computed, err := chartutil.CoalesceValues(r.Chart, r.Config)
	if err != nil {
		return fmt.Errorf("computed values of %s: %w", r.Name, err)
	}
	b.WriteString("\nCOMPUTED VALUES:\n")
	if err := output.EncodeYAML(b, computed.AsMap()); err != nil {
		return err
	}
	b.WriteString("\nHOOKS:\n")
	writeHooks(b, r)
	fmt.Fprintf(b, "MANIFEST:\n%s\n", r.Manifest)
	return nil
}

// writeHooks is how helm prints hooks (get hooks, get all).
func writeHooks(w io.Writer, r *helmrelease.Release) {
	for _, h := range r.Hooks {
		fmt.Fprintf(w, "---\n# Source: %s\n%s\n", h.Path, h.Manifest)
	}
}

// helmTime is how helm's list prints times (time.Time's String), used for the progress's.
const helmTime = "2006-01-02 15:04:05.999999999 -0700 MST"

// writeProgress is what the pending action is doing.
func writeProgress(b *strings.Builder, p *progress.Progress) {
	if p == nil {
		return
	}
	fmt.Fprintf(b, "PHASE: %s\nREADY: %d/%d\n", p.Phase, p.Ready, p.Total)
	if len(p.WaitingFor) > 0 {
		fmt.Fprintf(b, "WAITING FOR: %s\n", strings.Join(p.WaitingFor, ", "))
	}
	if p.Hook != "" {
		fmt.Fprintf(b, "HOOK: %s\n", p.Hook)
	}
	if len(p.Warnings) > 0 {
		b.WriteString("WARNINGS:\n")
		for _, m := range p.Warnings {
			fmt.Fprintf(b, "  %s\n", m)
		}
	}
	if !p.Updated.IsZero() {
		fmt.Fprintf(b, "PROGRESS UPDATED: %s\n", p.Updated.Format(helmTime))
	}
}

// queueWords is a queued revision in status, its position in its namespace's own queue:
// "position 312 of 1200, waiting 2m10s for an executor[, expected to start at <UTC time>]".
func queueWords(q *api.Queue) string {
	return fmt.Sprintf("position %d of %d, waiting %s for an executor", q.Position, q.Total, queueAge(q)) + expectedStart(q, ", expected to start at ")
}

// queueShort is a queued revision in a list row or line: "queued 312/1200, 2m10s[, start ~<UTC>]".
func queueShort(q *api.Queue) string {
	return fmt.Sprintf("queued %d/%d, %s", q.Position, q.Total, queueAge(q)) + expectedStart(q, ", start ~")
}

// expectedStart is prefix and the queue's expected start in UTC (RFC 3339), or "" without one.
func expectedStart(q *api.Queue, prefix string) string {
	if q.ExpectedStart == nil {
		return ""
	}
	return prefix + q.ExpectedStart.UTC().Format(time.RFC3339)
}

func queueAge(q *api.Queue) time.Duration { return time.Duration(max(q.AgeSeconds, 0)) * time.Second }
