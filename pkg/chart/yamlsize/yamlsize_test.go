package yamlsize

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
)

// bomb is one anchored scalar of size bytes aliased n times: what a tenant's index.yaml
// or values.yaml can hold in a few KiB of archive.
func bomb(size, n int) []byte {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nx:\n- &a \"")
	b.WriteString(strings.Repeat("A", size))
	b.WriteString("\"\n")
	for i := 0; i < n; i++ {
		b.WriteString("- *a\n")
	}
	return []byte(b.String())
}

func TestAliasBombIsRefused(t *testing.T) {
	data := bomb(1<<20, 200) // 1 MiB that sigs.k8s.io/yaml writes out as ~200 MiB
	_, err := Expanded(data, 10<<20)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("a %d KiB stream expanding to ~200 MiB: %v, want ErrTooLarge", len(data)>>10, err)
	}
}

func TestNestedAliasesAreCountedWithoutWalkingThemAgain(t *testing.T) {
	// Each level doubles the one before: 2^40 bytes written out, 40 lines of YAML.
	var b strings.Builder
	b.WriteString("a0: &a0 \"xx\"\n")
	for i := 1; i <= 40; i++ {
		b.WriteString("a" + strconv.Itoa(i) + ": &a" + strconv.Itoa(i) + " [*a" + strconv.Itoa(i-1) + ", *a" + strconv.Itoa(i-1) + "]\n")
	}
	_, err := Expanded([]byte(b.String()), 64<<20)
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("2^40 bytes of nested aliases: %v, want ErrTooLarge", err)
	}
}

func TestAliasesWithinTheBoundAreMeasured(t *testing.T) {
	data := []byte("base: &b {image: nginx, tag: \"1.0\"}\nweb:\n  <<: *b\n  replicas: 2\nworker: *b\n")
	n, err := Expanded(data, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if n.Bytes <= int64(len("nginx1.0"))*3 || n.Bytes > 4*int64(len(data)) {
		t.Errorf("expanded size %d for %d bytes with the anchor used three times", n.Bytes, len(data))
	}
}

func TestStreamWithoutAliasesIsNotParsed(t *testing.T) {
	// Not YAML at all, but without '&' and '*' nothing in it can expand: its own size.
	data := []byte("{{ .Values.x }}: [unclosed")
	n, err := Expanded(data, 1<<20)
	if err != nil || n != (Size{Bytes: jsonBound(data), Nodes: Nodes(data)}) {
		t.Fatalf("Expanded = %+v, %v; want its own size, nil", n, err)
	}
}

func TestUnmeasurableStreamWithAliasesIsRefused(t *testing.T) {
	if _, err := Expanded([]byte("a: &x [1\nb: *x\n"), 1<<20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("an unparsable stream with an anchor and an alias: %v, want ErrTooLarge", err)
	}
}

func TestEveryDocumentOfAStreamCounts(t *testing.T) {
	doc := "x: &a \"" + strings.Repeat("B", 4096) + "\"\ny: [*a, *a, *a, *a]\n"
	data := []byte(doc + "---\n" + doc + "---\n" + doc)
	one, err := Expanded([]byte(doc), 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	three, err := Expanded(data, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	if three.Bytes < 3*one.Bytes || three.Nodes < 3*one.Nodes {
		t.Errorf("three documents measured %+v, one %+v", three, one)
	}
	if _, err := Expanded(data, 2*one.Bytes); !errors.Is(err, ErrTooLarge) {
		t.Errorf("three documents against a bound of two: %v, want ErrTooLarge", err)
	}
}

func TestAliasInsideItsOwnAnchorIsRefused(t *testing.T) {
	if _, err := Expanded([]byte("a: &x [1, *x]\n"), 1<<20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("an alias inside its own anchor: %v, want ErrTooLarge", err)
	}
}

func TestProseAndCronLinesAreNotParsed(t *testing.T) {
	// "&" and "*" as GitLab's values.yaml has them: never an anchor, so never parsed.
	data := []byte("## Installation & configuration\nschedule: \"0 1 * * *\"\n# use *either* this\nbad: [\n")
	n, err := Expanded(data, 1<<20)
	if err != nil || n.Bytes != jsonBound(data) {
		t.Fatalf("Expanded = %+v, %v; want %d bytes, nil (not parsed)", n, err, jsonBound(data))
	}
	if !mayName([]byte("a: &x 1"), '&') || mayName([]byte("a & b &"), '&') {
		t.Error("mayName: an anchor must count, a lone ampersand must not")
	}
}

func TestEscapedScalarsCountAsJSONWritesThem(t *testing.T) {
	// "<" is 6 bytes in JSON: 14 aliases of 1 MiB of it are ~90 MiB, not ~15.
	data := []byte("x: &a \"" + strings.Repeat("<", 1<<20) + "\"\ny: [" + strings.Repeat("*a, ", 13) + "*a]\n")
	if _, err := Expanded(data, 64<<20); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("14 aliases of 1 MiB of '<' against 64 MiB: %v, want ErrTooLarge", err)
	}
	if n := jsonLen("a<b\"c\n"); n != 2+1+6+1+2+1+6 {
		t.Errorf("jsonLen = %d", n)
	}
}

func TestNodeHeavyStreamWithAliasesIsRefusedBeforeItIsParsed(t *testing.T) {
	// A few MiB of "{}," with one anchor and one alias: the parse tree alone would take
	// hundreds of MiB.
	data := []byte("a: &x 1\nb: *x\nc: [" + strings.Repeat("{},", 1<<20) + "{}]\n")
	var err error
	n := testing.AllocsPerRun(1, func() { _, err = Expanded(data, 64<<20) })
	if !errors.Is(err, ErrTooLarge) || n > 100 {
		t.Fatalf("3 MiB of empty maps with an alias: %v after %.0f allocations, want ErrTooLarge before parsing", err, n)
	}
}

// An alias is decoded again every time it is used: its nodes count every time. 12 KiB of
// aliases (a list of 1,000 aliases of a one-key map, aliased 100 times) is 100,000 maps
// to the parser (641 MiB live from 18 such subcharts counted 94,000 nodes).
func TestAliasedNodesCountWrittenOut(t *testing.T) {
	var b strings.Builder
	b.WriteString("v: &v {a: 1}\nl: &l [" + strings.Repeat("*v, ", 999) + "*v]\nm: {")
	for i := 0; i < 100; i++ {
		fmt.Fprintf(&b, "c%d: *l, ", i)
	}
	b.WriteString("end: 1}\n")
	data := []byte(b.String())
	n, err := Expanded(data, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bytes: %d nodes counted from the bytes, %+v written out", len(data), Nodes(data), n)
	if n.Nodes < 100*1000*3 {
		t.Errorf("%d nodes for 100,000 maps of one key each, want at least 300,000", n.Nodes)
	}
}

// Without aliases a stream is measured as JSON writes it: "<" is 6 bytes there (10 MiB of it
// in an index, under its 10 MiB bound, took 244 MiB to parse).
func TestEscapedCharactersCountWithoutAliases(t *testing.T) {
	data := []byte("x: \"" + strings.Repeat("<", 2<<20) + "\"\n")
	if _, err := Expanded(data, 10<<20); !errors.Is(err, ErrTooLarge) {
		t.Errorf("2 MiB of '<' (12 MiB as JSON) against 10 MiB: %v, want ErrTooLarge", err)
	}
	if n, err := Expanded([]byte("a: b\n"), 10<<20); err != nil || n.Bytes < 5 {
		t.Errorf("a plain line: %+v, %v", n, err)
	}
}
