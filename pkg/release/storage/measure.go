package storage

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"sync"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
)

// ErrManifestsTooLarge is a record whose manifest and hooks expand, aliases written out, past
// a render's bounds (bounds.MaxRenderedBytes, bounds.MaxRenderedNodes): Helm's upgrade,
// rollback and uninstall parse the tenant's records so. A record from an allowed render fits.
var ErrManifestsTooLarge = errors.New("the record's manifests are too large")

// Measured wraps d so that every record it reads (Get, List, Query) is measured first: one
// past the bounds is an ErrManifestsTooLarge error, never handed to Helm. Helm reads the
// history about four times an upgrade: manifests once measured are known by their digest.
func Measured(d Driver) Driver { return &measured{Driver: d, within: map[[sha256.Size]byte]bool{}} }

type measured struct {
	Driver
	mu     sync.Mutex
	within map[[sha256.Size]byte]bool // digests of the manifests and hooks measured within the bounds
}

func (m *measured) Get(key string) (*helmrelease.Release, error) {
	rls, err := m.Driver.Get(key)
	if err != nil {
		return rls, err
	}
	if err := m.measure(rls); err != nil {
		return nil, err
	}
	return rls, nil
}

func (m *measured) List(filter func(*helmrelease.Release) bool) ([]*helmrelease.Release, error) {
	return m.measureAll(m.Driver.List(filter))
}

func (m *measured) Query(labels map[string]string) ([]*helmrelease.Release, error) {
	return m.measureAll(m.Driver.Query(labels))
}

func (m *measured) measureAll(rels []*helmrelease.Release, err error) ([]*helmrelease.Release, error) {
	if err != nil {
		return rels, err
	}
	for _, r := range rels {
		if err := m.measure(r); err != nil {
			return nil, err
		}
	}
	return rels, nil
}

func (m *measured) measure(rls *helmrelease.Release) error {
	h := sha256.New()
	fmt.Fprintf(h, "%d\x00%s", len(rls.Manifest), rls.Manifest)
	for _, k := range rls.Hooks {
		fmt.Fprintf(h, "%d\x00%s", len(k.Manifest), k.Manifest)
	}
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.within[sum] {
		return nil
	}
	if err := Measure(rls); err != nil {
		return err
	}
	m.within[sum] = true
	return nil
}

// Measure refuses a record whose manifest and hooks together expand past a render's bounds,
// the manifest measured by document as the render was (not the lines Helm adds around them).
func Measure(rls *helmrelease.Release) error {
	total := yamlsize.NewTotal(yamlsize.Size{Bytes: bounds.MaxRenderedBytes, Nodes: bounds.MaxRenderedNodes})
	err := documents(rls.Manifest, func(doc string) error { return total.Add([]byte(doc)) })
	for _, h := range rls.Hooks {
		if err == nil {
			err = total.Add([]byte(h.Manifest))
		}
	}
	if err != nil {
		return fmt.Errorf("%w: revision %d of %s/%s: %v (bounds: %d MiB, %d YAML nodes)", ErrManifestsTooLarge,
			rls.Version, rls.Namespace, rls.Name, err, bounds.MaxRenderedBytes>>20, bounds.MaxRenderedNodes)
	}
	return nil
}

// documents calls fn with each document of manifest, cut where YAML's parsers cut them
// (a line starting "---"; an alias never reaches into another document), without the
// blank and comment lines before its first node.
func documents(manifest string, fn func(string) error) error {
	rest, _ := strings.CutPrefix(manifest, "---")
	for {
		doc, next, more := strings.Cut(rest, "\n---")
		if err := fn(withoutLeadingComments(doc)); err != nil {
			return err
		}
		if !more {
			return nil
		}
		rest = next
	}
}

// withoutLeadingComments is doc without its first lines while they are blank or comments
// (no node starts in them); the first other line keeps its indentation.
func withoutLeadingComments(doc string) string {
	for {
		line, rest, ok := strings.Cut(doc, "\n")
		if t := strings.TrimLeft(line, " \t\r"); t != "" && t[0] != '#' || !ok {
			return doc
		}
		doc = rest
	}
}
