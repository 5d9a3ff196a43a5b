package diff

import (
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
)

// Bounds of what is parsed: manifests are the tenant's (a release record, a chart's
// render), and a YAML parser holds up to ~450 bytes a node (yamlsize.Nodes).
const (
	// MaxHeadNodes bounds the lines that name an object (apiVersion, kind, metadata's name
	// and namespace), the only part of most documents that is parsed.
	MaxHeadNodes = 10_000
	// MaxDocumentNodes bounds a document parsed whole: a Secret (to mask it), or a document
	// whose head is not in block style.
	MaxDocumentNodes = 100_000
	// maxParsedBytes bounds what a parsed text may expand to with its YAML aliases written out.
	maxParsedBytes = 16 << 20
)

// headOf parses what names the object of doc: its top-level apiVersion, kind and
// metadata's name and namespace lines when doc is in block style, else the whole document,
// each bounded.
func headOf(doc string) (head, error) {
	text, ok := headLines(doc)
	limit := int64(MaxHeadNodes)
	if !ok {
		text, limit = doc, MaxDocumentNodes
	}
	var h head
	if err := parseBounded(text, limit, &h); err != nil {
		return h, fmt.Errorf("parse a manifest document: %w", err)
	}
	return h, nil
}

// parseBounded unmarshals text into v once its nodes and expanded size are within bounds.
func parseBounded(text string, maxNodes int64, v any) error {
	if n := yamlsize.Nodes([]byte(text)); n > maxNodes {
		return fmt.Errorf("%w: up to %d nodes, over %d", yamlsize.ErrTooLarge, n, maxNodes)
	}
	if _, err := yamlsize.Expanded([]byte(text), maxParsedBytes); err != nil {
		return err
	}
	return yaml.Unmarshal([]byte(text), v)
}

// headLines are doc's top-level apiVersion, kind and metadata lines, and of metadata's
// block only its name and namespace; ok is false when doc has no top-level "kind:" line
// (flow style, quoted keys: parsed whole).
func headLines(doc string) (string, bool) {
	var b strings.Builder
	inMeta, child, hasKind := false, "", false
	for _, line := range strings.Split(doc, "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if len(trimmed) == len(line) { // top level
			inMeta, child = false, ""
			switch {
			case strings.HasPrefix(line, "kind:"):
				hasKind = true
			case strings.HasPrefix(line, "metadata:"):
				inMeta = true
			case !strings.HasPrefix(line, "apiVersion:"):
				continue
			}
			b.WriteString(line + "\n")
			continue
		}
		if !inMeta {
			continue
		}
		indent := line[:len(line)-len(trimmed)]
		if child == "" {
			child = indent
		}
		if indent == child && (strings.HasPrefix(trimmed, "name:") || strings.HasPrefix(trimmed, "namespace:")) {
			b.WriteString(line + "\n")
		}
	}
	return b.String(), hasKind
}
