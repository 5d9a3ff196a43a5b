package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"golang.org/x/term"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/submitclient"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// ErrFailed is returned (exit 1) when a followed release ends failed.
var ErrFailed = errors.New("release failed")

// view draws a followed release: pending states as they come, then the final one.
type view interface {
	pending(rel *api.Release, elapsed time.Duration)
	final(rel *api.Release, elapsed time.Duration)
	// interrupted ends the output when following stops early (Ctrl-C, an error).
	interrupted()
}

// tracker follows one release through submit.
type tracker struct {
	g        *Globals
	c        *submitclient.Client
	ns, name string
}

func (g *Globals) track(t target, name string) tracker {
	return tracker{g: g, c: t.submit, ns: t.ns, name: name}
}

// follow polls the release until its latest revision is final and returns that revision.
func (t tracker) follow(ctx context.Context) (*api.Release, error) {
	start := wallclock.Or(t.g.Clock).Now()
	v := newView(t.g.IO.Out, t.name)
	for {
		rel, err := t.c.Get(ctx, t.ns, t.name)
		if err != nil {
			v.interrupted()
			return nil, err
		}
		elapsed := wallclock.Or(t.g.Clock).Now().Sub(start)
		if !release.IsPending(statusOf(rel)) {
			v.final(rel, elapsed)
			return rel, nil
		}
		v.pending(rel, elapsed)
		if err := t.g.pause(ctx); err != nil {
			v.interrupted()
			return nil, err
		}
	}
}

// toEnd follows the release and turns a final state other than deployed into ErrFailed.
func (t tracker) toEnd(ctx context.Context) error {
	rel, err := t.follow(ctx)
	if err != nil {
		return err
	}
	if st := statusOf(rel); st != string(helmrelease.StatusDeployed) {
		return fmt.Errorf("%w: %s revision %d is %s", ErrFailed, t.name, rel.Version, st)
	}
	return nil
}

func newView(w io.Writer, name string) view {
	if f, ok := rawOut(w).(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		return &barView{w: f, name: name, width: func() int {
			if cols, _, err := term.GetSize(int(f.Fd())); err == nil && cols > 0 {
				return cols
			}
			return 80
		}, warned: map[string]bool{}}
	}
	return &lineView{w: w, name: name, warned: map[string]bool{}}
}

func statusOf(r *api.Release) string {
	if r.Release == nil || r.Info == nil {
		return "unknown"
	}
	return r.Info.Status.String()
}

// finalLine is the last line of a followed release, on a terminal or not.
func finalLine(w io.Writer, name string, rel *api.Release, elapsed time.Duration) {
	st := statusOf(rel)
	line := fmt.Sprintf("%s: %s, revision %d (%s)", name, st, rel.Version, roundElapsed(elapsed))
	if st != string(helmrelease.StatusDeployed) && rel.Info != nil && rel.Info.Description != "" {
		line += ": " + rel.Info.Description
	}
	fmt.Fprintln(w, escapeLine(line))
}

func roundElapsed(d time.Duration) time.Duration { return d.Round(time.Second) }

// newWarnings are the warnings of p not shown yet, oldest first, marked shown.
func newWarnings(p *progress.Progress, shown map[string]bool) []string {
	if p == nil {
		return nil
	}
	var out []string
	for i := len(p.Warnings) - 1; i >= 0; i-- {
		if w := p.Warnings[i]; !shown[w] {
			shown[w] = true
			out = append(out, w)
		}
	}
	return out
}

// describe is a pending state in words: the status, and what the action is doing.
func describe(rel *api.Release) string {
	s := fmt.Sprintf("%s, revision %d", statusOf(rel), rel.Version)
	p := rel.Progress
	if p == nil {
		if q := rel.Queue; q != nil { // the age is left out: a line per change, not per poll
			s += fmt.Sprintf(": queued, position %d of %d", q.Position, q.Total)
		}
		return s
	}
	if p.Attempt != "" { // a request with retries (attempts.go)
		s += " (attempt " + p.Attempt + ")"
	}
	unattempted := *p
	unattempted.Attempt = ""
	return s + ": " + unattempted.String()
}

// lineView prints one line per change and each warning once (logs, CI, golden files).
type lineView struct {
	w      io.Writer
	name   string
	last   string
	warned map[string]bool
}

func (v *lineView) pending(rel *api.Release, elapsed time.Duration) {
	for _, w := range newWarnings(rel.Progress, v.warned) {
		fmt.Fprintf(v.w, "%s: warning: %s\n", v.name, w)
	}
	if d := describe(rel); d != v.last {
		fmt.Fprintf(v.w, "%s: %s (%s)\n", v.name, d, roundElapsed(elapsed))
		v.last = d
	}
}

func (v *lineView) final(rel *api.Release, elapsed time.Duration) {
	finalLine(v.w, v.name, rel, elapsed)
}

func (v *lineView) interrupted() {}

// ANSI: carriage return then erase to the end of the line, so each redraw replaces the last.
const eraseLine = "\r\033[K"

// barWidth is the number of cells of the ready/total bar.
const barWidth = 20

var spinner = []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")

// barView redraws one line in place, cut to the terminal's width; warnings go above it.
type barView struct {
	w      io.Writer
	name   string
	width  func() int
	frame  int
	warned map[string]bool
}

func (v *barView) pending(rel *api.Release, elapsed time.Duration) {
	var b strings.Builder
	for _, w := range newWarnings(rel.Progress, v.warned) {
		b.WriteString(eraseLine + "warning: " + escapeLine(w) + "\n")
	}
	b.WriteString(eraseLine + truncate(escapeLine(barLine(v.name, rel, elapsed, spinner[v.frame%len(spinner)])), v.width()-1))
	v.frame++
	_, _ = io.WriteString(v.w, b.String())
}

// interrupted keeps the last frame and ends its line, so the error is printed below it.
func (v *barView) interrupted() {
	if v.frame > 0 {
		_, _ = io.WriteString(v.w, "\n")
	}
}

func (v *barView) final(rel *api.Release, elapsed time.Duration) {
	_, _ = io.WriteString(v.w, eraseLine)
	finalLine(v.w, v.name, rel, elapsed)
}

// barLine is the live line of a pending release.
func barLine(name string, rel *api.Release, elapsed time.Duration, spin rune) string {
	el := roundElapsed(elapsed).String()
	p := rel.Progress
	if p == nil {
		// Not started yet (or the first record is not written): the status, the queue.
		s := fmt.Sprintf("%c %s %s, revision %d  %s", spin, name, statusOf(rel), rel.Version, el)
		if rel.Queue != nil {
			s += "  " + queueShort(rel.Queue)
		}
		return s
	}
	filled := 0
	if p.Total > 0 {
		filled = p.Ready * barWidth / p.Total
	}
	s := fmt.Sprintf("%c %s [%s%s] %d/%d %s  %s", spin, name, strings.Repeat("█", filled), strings.Repeat("░", barWidth-filled),
		p.Ready, p.Total, p.Phase, el)
	if p.Hook != "" {
		s += "  hook " + p.Hook
	}
	if len(p.WaitingFor) > 0 {
		s += "  waiting for " + strings.Join(p.WaitingFor, ", ")
	}
	return s
}

// truncate cuts s to n columns (one per rune), with an ellipsis where it cut.
func truncate(s string, n int) string {
	if n < 1 {
		return ""
	}
	if utf8.RuneCountInString(s) <= n {
		return s
	}
	r := []rune(s)
	return string(r[:n-1]) + "…"
}
