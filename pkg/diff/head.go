package diff

import (
	"fmt"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
)

// Bounds of what is parsed (a tenant's manifests): a YAML parser holds ~450 bytes a node.
const (
	// MaxHeadNodes bounds the lines that name an object (apiVersion, kind, metadata's name
	// and namespace), the only part of most documents that is parsed.
	MaxHeadNodes = 10_000
	// MaxDocumentNodes bounds a document parsed whole: a Secret, or a head not in plain block style.
	MaxDocumentNodes = 100_000
	// maxParsedBytes bounds what a parsed text may expand to with its YAML aliases written out.
	maxParsedBytes = 16 << 20
)

// head is what names an object, with exact keys as the apply decodes it (a later key wins).
type head struct {
	APIVersion, Kind, Name, Namespace string
}

// headOf parses what names doc's object: its head lines when plain (headLines), else all of it.
func headOf(doc string) (head, error) {
	if text, ok := headLines(doc); ok {
		if h, err := parseHead(text, MaxHeadNodes); err == nil {
			return h, nil
		}
	}
	h, err := parseHead(doc, MaxDocumentNodes)
	if err != nil {
		return h, fmt.Errorf("parse a manifest document: %w", err)
	}
	return h, nil
}

func parseHead(text string, maxNodes int64) (head, error) {
	var m map[string]any
	if err := parseBounded(text, maxNodes, &m); err != nil {
		return head{}, err
	}
	meta, _ := m["metadata"].(map[string]any)
	str := func(v any) string { s, _ := v.(string); return s }
	return head{APIVersion: str(m["apiVersion"]), Kind: str(m["kind"]),
		Name: str(meta["name"]), Namespace: str(meta["namespace"])}, nil
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

// plainKey is a key line a YAML parser reads as written: unquoted, no merge, no complex key.
var plainKey = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_./-]*:( |$)`)

// headLines are doc's top-level apiVersion, kind and metadata lines, and metadata's name and
// namespace; ok is false (parse it whole) unless every key line there is plainKey and no value
// goes on past its line: else the object could be named otherwise than the lines kept say.
func headLines(doc string) (string, bool) {
	var b strings.Builder
	inMeta, child, hasKind := false, "", false
	valueIndent := -1 // the indent of the last head value's line, while it may go on
	for _, line := range strings.Split(doc, "\n") {
		trimmed := strings.TrimLeft(line, " \t")
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		indent := line[:len(line)-len(trimmed)]
		if valueIndent >= 0 && len(indent) > valueIndent {
			return "", false
		}
		valueIndent = -1
		if indent == "" {
			if !plainKey.MatchString(line) {
				return "", false
			}
			inMeta, child = false, ""
			switch key := line[:strings.Index(line, ":")]; key {
			case "kind", "apiVersion":
				if blockScalar(line) {
					return "", false
				}
				hasKind, valueIndent = hasKind || key == "kind", 0
			case "metadata":
				inMeta = true
			default:
				continue
			}
			b.WriteString(line + "\n")
			continue
		}
		if !inMeta || (child != "" && indent != child) {
			continue
		}
		child = indent
		if !plainKey.MatchString(trimmed) {
			return "", false
		}
		if strings.HasPrefix(trimmed, "name:") || strings.HasPrefix(trimmed, "namespace:") {
			if blockScalar(trimmed) {
				return "", false
			}
			b.WriteString(line + "\n")
			valueIndent = len(indent)
		}
	}
	return b.String(), hasKind
}

// blockScalar reports a key line whose value is a block scalar (| or >).
func blockScalar(line string) bool {
	v := strings.TrimSpace(line[strings.Index(line, ":")+1:])
	return strings.HasPrefix(v, "|") || strings.HasPrefix(v, ">")
}
