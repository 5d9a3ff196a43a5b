package helmexec

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"path"
	"strconv"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release/storage"
)

// frozenMark, an annotation of a frozen chart's metadata, holds the action's nonce: only
// a chart this action froze is swapped back for the real one where Helm stores it.
const frozenMark = "async-helm.io/frozen-render"

// frozen is a chart whose templates are what a worker rendered, as literal text, and the
// real chart Helm's records must hold instead.
type frozen struct {
	chart    *chart.Chart
	original *chart.Chart
	nonce    string
}

// newFrozen is an action's frozen chart, built (freeze) once its storage wraps it.
func newFrozen() (*frozen, error) {
	var nonce [12]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return nil, fmt.Errorf("freeze the render: %w", err)
	}
	return &frozen{nonce: hex.EncodeToString(nonce[:])}, nil
}

// freeze builds the chart Helm renders in process instead of ch (dependencies processed):
// the same tree, each template the literal text the worker rendered from it, so Helm's
// manifests, hooks, notes and `# Source:` lines are the worker's at the cost of a copy. It
// has no values, schemas or conditions; its files (CRDs) are the chart's. check fails
// Helm's render with another release or capabilities than the worker's.
func (fz *frozen) freeze(ch *chart.Chart, files map[string]string, check GuardRender) {
	fz.original = ch
	fz.chart = freezeTree(ch, nil, files)
	fz.chart.Metadata.Annotations[frozenMark] = fz.nonce
	checked := false
	forEachTemplate(fz.chart, func(t *chart.File) {
		if !checked && !strings.HasPrefix(path.Base(t.Name), "_") {
			t.Data = append([]byte(renderCheck(check)), t.Data...)
			checked = true
		}
	})
}

// freezeTree freezes c, a dependency of parent (nil: the root).
func freezeTree(c, parent *chart.Chart, files map[string]string) *chart.Chart {
	md := *c.Metadata
	md.Dependencies = nil
	md.Annotations = map[string]string{}
	for k, v := range c.Metadata.Annotations {
		md.Annotations[k] = v
	}
	fc := &chart.Chart{Metadata: &md, Files: c.Files}
	if parent != nil {
		parent.AddDependency(fc)
	}
	full := fc.ChartFullPath()
	for _, t := range c.Templates {
		out, ok := files[path.Join(full, t.Name)]
		if !ok { // a partial: its output is nobody's
			continue
		}
		fc.Templates = append(fc.Templates, &chart.File{Name: t.Name, Data: []byte(literal(out))})
	}
	for _, d := range c.Dependencies() {
		freezeTree(d, fc, files)
	}
	return fc
}

func forEachTemplate(c *chart.Chart, fn func(*chart.File)) {
	for _, t := range c.Templates {
		fn(t)
	}
	for _, d := range c.Dependencies() {
		forEachTemplate(d, fn)
	}
}

// literal is a Go template whose output is s: one action printing s as one string (an
// action per "{{" costs the parser 200x the output), raw (a quoted one costs 4x) unless s
// holds a backquote or a carriage return (a raw string drops it).
func literal(s string) string {
	if s == "" {
		return ""
	}
	if strings.ContainsAny(s, "`\r") {
		return "{{" + strconv.Quote(s) + "}}"
	}
	return "{{`" + s + "`}}"
}

// renderCheck is a template that renders nothing when Helm renders with the release and
// Kubernetes version the worker rendered with, and fails otherwise.
func renderCheck(g GuardRender) string {
	caps := g.Caps
	if caps == nil {
		caps = chartutil.DefaultCapabilities
	}
	return fmt.Sprintf(`{{if or (ne .Release.Name %s) (ne .Release.Namespace %s) (ne .Release.Revision %d) (ne .Release.IsUpgrade %t) (ne .Release.IsInstall %t) (ne .Capabilities.KubeVersion.Version %s)}}{{fail "async-helm: Helm rendered another release than the render worker"}}{{end}}`,
		strconv.Quote(g.Release.Name), strconv.Quote(g.Release.Namespace), g.Release.Revision, g.Release.IsUpgrade,
		g.Release.IsInstall, strconv.Quote(caps.KubeVersion.Version))
}

// thaw puts the real chart back into a release that holds the frozen one.
func (fz *frozen) thaw(rel *helmrelease.Release) {
	if fz.original != nil && rel != nil && rel.Chart != nil && rel.Chart.Metadata != nil && rel.Chart.Metadata.Annotations[frozenMark] == fz.nonce {
		rel.Chart = fz.original
	}
}

// storage wraps d so that every record Helm writes with the frozen chart holds the real one.
func (fz *frozen) storage(d storage.Driver) storage.Driver {
	return writeHook{Driver: d, before: func(_ string, rel *helmrelease.Release) { fz.thaw(rel) }}
}
