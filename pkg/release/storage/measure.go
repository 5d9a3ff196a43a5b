package storage

import (
	"errors"
	"fmt"
	"strings"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
)

// ErrManifestsTooLarge is a record whose manifest and hooks expand, aliases written out,
// past the bounds of a render (bounds.MaxRenderedBytes, bounds.MaxRenderedNodes): Helm's
// upgrade, rollback and uninstall parse the records they act on (the kube client's Build,
// releaseutil.SortManifests) with every alias written out, and a record is read from the
// tenant's namespace. A record Helm wrote from a render async-helm allowed is within them.
var ErrManifestsTooLarge = errors.New("the record's manifests are too large")

// Measured wraps d so that every record it reads (Get, List, Query) is measured first: one
// past the bounds is an ErrManifestsTooLarge error, never handed to Helm.
func Measured(d Driver) Driver { return measured{Driver: d} }

type measured struct{ Driver }

func (m measured) Get(key string) (*helmrelease.Release, error) {
	rls, err := m.Driver.Get(key)
	if err != nil {
		return rls, err
	}
	if err := Measure(rls); err != nil {
		return nil, err
	}
	return rls, nil
}

func (m measured) List(filter func(*helmrelease.Release) bool) ([]*helmrelease.Release, error) {
	return measureAll(m.Driver.List(filter))
}

func (m measured) Query(labels map[string]string) ([]*helmrelease.Release, error) {
	return measureAll(m.Driver.Query(labels))
}

func measureAll(rels []*helmrelease.Release, err error) ([]*helmrelease.Release, error) {
	if err != nil {
		return rels, err
	}
	for _, r := range rels {
		if err := Measure(r); err != nil {
			return nil, err
		}
	}
	return rels, nil
}

// Measure refuses a record whose manifest and hooks together expand past a render's
// bounds. The manifest is measured document by document, as Helm wrote it ("---",
// "# Source: <file>", the document): the render measured the documents, not the lines
// Helm adds around them.
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
