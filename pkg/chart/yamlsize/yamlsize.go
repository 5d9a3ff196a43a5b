// Package yamlsize bounds what a YAML stream expands to once its aliases are written out:
// sigs.k8s.io/yaml (Helm's loader, index parsing) writes every alias out in full, and
// go-yaml's own guard does nothing below 1,000 nodes, so a few KiB of a tenant's file can
// parse into gigabytes. They are measured here, from the parse tree, before anything expands them.
package yamlsize

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	yaml "go.yaml.in/yaml/v3"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
)

// ErrTooLarge is a stream whose aliases expand it beyond the limit, or which refers to a
// node that contains the alias (no parser can expand it).
var ErrTooLarge = errors.New("YAML expands beyond its bound")

// Size is what a YAML stream parses into with every alias written out.
type Size struct {
	// Bytes is about the length of its JSON form (a bound, not an exact count).
	Bytes int64
	// Nodes bounds the nodes a parser builds: Nodes(data), or the parse tree's with each
	// alias counted as its anchor's subtree when more (a parser decodes an alias again
	// every time: 12 KiB of aliases can be 100,000 maps).
	Nodes int64
}

// Expanded returns about what data parses into with every alias written out, or
// ErrTooLarge once its bytes pass limit. A stream without both a possible anchor ("&name")
// and alias ("*name") is not parsed: its size is its own. One with both that does not parse
// here is refused: its aliases cannot be measured.
func Expanded(data []byte, limit int64) (Size, error) {
	own := Size{Bytes: jsonBound(data), Nodes: Nodes(data)}
	if !mayName(data, '&') || !mayName(data, '*') {
		if own.Bytes > limit {
			return Size{}, fmt.Errorf("%w: more than %d bytes as JSON", ErrTooLarge, limit)
		}
		return own, nil
	}
	// The parse tree takes ~64 bytes a node: bounded before parsing.
	if own.Nodes > bounds.MaxAliasedNodes {
		return Size{}, fmt.Errorf("%w: up to %d nodes with aliases, over %d", ErrTooLarge, own.Nodes, bounds.MaxAliasedNodes)
	}
	m := measure{limit: limit, sizes: map[*yaml.Node]Size{}}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return Size{Bytes: m.total.Bytes, Nodes: max(m.total.Nodes, own.Nodes)}, nil
		}
		if err != nil {
			return Size{}, fmt.Errorf("%w: its aliases cannot be measured: %v", ErrTooLarge, err)
		}
		n, err := m.size(&doc)
		if err != nil {
			return Size{}, err
		}
		m.total.Bytes += n.Bytes
		m.total.Nodes += n.Nodes
		if m.total.Bytes > limit {
			return Size{}, m.over()
		}
	}
}

// Total measures several YAML streams as one: what they expand to together, aliases
// written out, within one bound (a render's files, a record's manifests).
type Total struct {
	limit, used Size
}

// NewTotal is a Total within limit.
func NewTotal(limit Size) *Total { return &Total{limit: limit} }

// Add measures data within what the streams before it left, or returns ErrTooLarge.
func (t *Total) Add(data []byte) error {
	size, err := Expanded(data, t.limit.Bytes-t.used.Bytes)
	if err != nil {
		return err
	}
	t.used.Bytes += size.Bytes
	if t.used.Nodes += size.Nodes; t.used.Nodes > t.limit.Nodes {
		return fmt.Errorf("%w: %d YAML nodes together, over %d", ErrTooLarge, t.used.Nodes, t.limit.Nodes)
	}
	return nil
}

// Nodes bounds the nodes data parses into from its bytes alone: every node but the first
// starts after a line break, an indicator or a separator. A parser's memory follows the
// nodes (up to ~450 bytes a node: 490 KiB of "{a: }," took 108 MiB), so callers bound it too.
func Nodes(data []byte) int64 {
	n := int64(1)
	for _, c := range data {
		switch c {
		case '\n', ',', ':', '-', '[', '{', '?':
			n++
		}
	}
	return n
}

// jsonBound bounds the length of data's JSON form: a character JSON escapes is written
// longer ("<" as \u003c: 10 MiB of "<" in an index took 244 MiB to parse).
func jsonBound(data []byte) int64 {
	n := int64(len(data))
	for _, c := range data {
		switch {
		case c == '<', c == '>', c == '&', c < 0x20 && c != '\n' && c != '\t' && c != '\r':
			n += 5
		case c == '"', c == '\\', c == '\n', c == '\t', c == '\r':
			n++
		}
	}
	return n
}

// jsonLen is a scalar's length as encoding/json writes it (sigs.k8s.io/yaml's output).
func jsonLen(v string) int64 {
	n := int64(len(v)) + 2
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '<', c == '>', c == '&', c < 0x20:
			n += 5
		case c == '"', c == '\\':
			n++
		}
	}
	return n
}

// mayName tells whether indicator is ever followed by a character an anchor's name may start
// with (YAML: anything but white space and the flow indicators).
func mayName(data []byte, indicator byte) bool {
	for i := bytes.IndexByte(data, indicator); i >= 0 && i+1 < len(data); {
		switch data[i+1] {
		case ' ', '\t', '\r', '\n', ',', '[', ']', '{', '}':
		default:
			return true
		}
		next := bytes.IndexByte(data[i+1:], indicator)
		if next < 0 {
			return false
		}
		i += 1 + next
	}
	return false
}

// measure sizes every node once: an alias costs its anchor's size, kept from the anchor's
// first walk, so the walk is linear however the aliases nest.
type measure struct {
	limit int64
	total Size
	sizes map[*yaml.Node]Size // anchored nodes; Bytes -1 while the node is being sized
}

func (m *measure) over() error {
	return fmt.Errorf("%w: more than %d bytes once its aliases are written out", ErrTooLarge, m.limit)
}

func (m *measure) size(n *yaml.Node) (Size, error) {
	if n.Kind == yaml.AliasNode {
		if n.Alias == nil {
			return Size{}, fmt.Errorf("%w: an alias without its anchor", ErrTooLarge)
		}
		return m.size(n.Alias)
	}
	anchored := n.Anchor != ""
	if s, ok := m.sizes[n]; ok {
		if s.Bytes < 0 {
			return Size{}, fmt.Errorf("%w: an alias inside the node it refers to", ErrTooLarge)
		}
		return s, nil
	}
	if anchored {
		m.sizes[n] = Size{Bytes: -1}
	}
	// A scalar as a JSON string; a collection as its brackets and separators.
	s := Size{Bytes: jsonLen(n.Value), Nodes: 1}
	for _, c := range n.Content {
		cs, err := m.size(c)
		if err != nil {
			return Size{}, err
		}
		s.Nodes += cs.Nodes
		if s.Bytes += cs.Bytes + 1; s.Bytes > m.limit {
			return Size{}, m.over()
		}
	}
	if anchored {
		m.sizes[n] = s
	}
	return s, nil
}

// JSONNodes counts the values of a JSON document by its structural bytes outside strings
// (`{`, `[`, `,`, `:`, one more than their count): a byte scan before a decode allocates a
// map, slice or interface for each (values of tiny maps decode to ~40 times their bytes).
// It stops past limit.
func JSONNodes(raw []byte, limit int64) int64 {
	n := int64(1)
	for i := 0; i < len(raw) && n <= limit; i++ {
		switch raw[i] {
		case '"':
			i += stringEnd(raw[i+1:]) + 1
		case '{', '[', ',', ':':
			n++
		}
	}
	return n
}

// stringEnd is the index in s of the quote that closes a JSON string s starts inside
// (len(s) when none does): the first quote not escaped by an odd run of backslashes.
func stringEnd(s []byte) int {
	for at := 0; ; {
		q := bytes.IndexByte(s[at:], '"')
		if q < 0 {
			return len(s)
		}
		q += at
		bs := 0
		for bs < q && s[q-1-bs] == '\\' {
			bs++
		}
		if bs%2 == 0 {
			return q
		}
		at = q + 1
	}
}
