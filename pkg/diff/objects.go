// Package diff is what an action would change: two manifests compared object by object as
// helm-diff compares them, Secrets' data masked, each change a unified diff.
package diff

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
)

// Object is one document of a manifest.
type Object struct {
	API, Kind, Namespace, Name string
	// Text is the document as rendered (a Secret's: normalised and masked by Compute).
	Text string
}

// Key names an object as helm-diff does: "namespace, name, Kind (group)". Helm matches an
// object by group, kind, namespace and name, so a new version of its API changes it.
func (o Object) Key() string {
	return fmt.Sprintf("%s, %s, %s (%s)", o.Namespace, o.Name, o.Kind, APIBase(o.API))
}

// APIBase is apiVersion without its version, as helm-diff names an API ("apps", "v1").
func APIBase(apiVersion string) string {
	if i := strings.LastIndex(apiVersion, "/"); i >= 0 {
		return apiVersion[:i]
	}
	return apiVersion
}

// ErrDuplicateObject: two documents of a manifest name one object.
var ErrDuplicateObject = errors.New("two documents name one object")

var separator = regexp.MustCompile(`(?m)^---[ \t]*(#.*)?$`)

// MaxDocuments bounds a manifest's documents: each costs a parse (GitLab 6.5.4 has a few hundred).
const MaxDocuments = 10_000

// Parse splits a manifest into its objects (by default in namespace), parsing only what names
// each (headOf), until ctx ends; no kind: skipped; two naming one object: ErrDuplicateObject.
func Parse(ctx context.Context, manifest, namespace string) (map[string]Object, error) {
	docs := separator.Split(manifest, MaxDocuments+2)
	if len(docs) > MaxDocuments+1 {
		return nil, fmt.Errorf("%w: more than %d documents", yamlsize.ErrTooLarge, MaxDocuments)
	}
	out := map[string]Object{}
	for _, doc := range docs {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("parse a manifest: %w", context.Cause(ctx))
		}
		h, err := headOf(doc)
		if err != nil {
			return nil, err
		}
		if h.Kind == "" {
			continue
		}
		o := Object{API: h.APIVersion, Kind: h.Kind, Namespace: cmp.Or(h.Namespace, namespace), Name: h.Name,
			Text: strings.Trim(doc, "\n") + "\n"}
		if first, ok := out[o.Key()]; ok {
			return nil, fmt.Errorf("%w: %s (as %s and as %s)", ErrDuplicateObject, o.Key(), first.API, o.API)
		}
		out[o.Key()] = o
	}
	return out, nil
}

func sortedKeys(a, b map[string]Object) []string {
	keys := slices.AppendSeq(slices.Collect(maps.Keys(a)), maps.Keys(b))
	slices.Sort(keys)
	return slices.Compact(keys)
}
