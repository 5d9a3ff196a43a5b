package diff

import (
	"fmt"
	"strings"
	"testing"
)

// Only what names an object is parsed: a body far over MaxDocumentNodes in block style is
// compared as text, and a nested "name:" is not the object's.
func TestOnlyTheHeadIsParsed(t *testing.T) {
	body := strings.Repeat("{a: b},", 3*MaxDocumentNodes)
	doc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels:\n    name: label\n  name: big\ndata:\n  x: \"" + body + "\"\n"
	objs, err := Parse(doc, "team")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := objs["team, big, ConfigMap (v1)"]; !ok || len(objs) != 1 {
		t.Fatalf("objects %v", keys(objs))
	}
}

// What is parsed whole is bounded: a flow-style document over MaxDocumentNodes and a head
// whose aliases expand are errors before any parser builds them; a Secret over the bound
// is not shown.
func TestParsedTextIsBounded(t *testing.T) {
	flow := "{apiVersion: v1, kind: ConfigMap, metadata: {name: x}, data: {" + strings.Repeat("a: b,", MaxDocumentNodes) + "}}\n"
	if _, err := Parse(flow, "team"); err == nil || !strings.Contains(err.Error(), "nodes") {
		t.Errorf("flow document over the bound: %v", err)
	}
	var bomb strings.Builder
	bomb.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&bomb, "  namespace: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	if _, err := Parse(bomb.String(), "team"); err == nil || !strings.Contains(err.Error(), "expands") {
		t.Errorf("aliases in a head: %v", err)
	}
	secret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n" + strings.Repeat("  k: eA==\n", MaxDocumentNodes)
	changes, err := Compute(secret, secret+"  z: eA==\n", "team", Options{Context: 3})
	if err != nil || len(changes) != 1 {
		t.Fatalf("changes %v, %v", changes, err)
	}
	if strings.Contains(changes[0].Diff, "eA==") || !strings.Contains(changes[0].Diff, "not shown") {
		t.Errorf("a Secret over the bound shows:\n%.300s", changes[0].Diff)
	}
}

// Past MaxLines in one comparison, changed objects are named without their lines.
func TestLinesOfOneDiffAreBounded(t *testing.T) {
	var before, after strings.Builder
	per := MaxObjectLines - 10
	n := MaxLines/(2*per) + 2
	for i := 0; i < n; i++ {
		head := fmt.Sprintf("---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\ndata:\n", i)
		before.WriteString(head + strings.Repeat("  k: v\n", per))
		after.WriteString(head + strings.Repeat("  k: v\n", per) + "  z: w\n")
	}
	changes, err := Compute(before.String(), after.String(), "team", Options{Context: 1})
	if err != nil || len(changes) != n {
		t.Fatalf("%d changes, want %d: %v", len(changes), n, err)
	}
	if !strings.Contains(changes[0].Diff, "+  z: w") {
		t.Errorf("the first object is not compared:\n%s", changes[0].Diff)
	}
	if last := changes[n-1].Diff; !strings.Contains(last, "not compared line by line") {
		t.Errorf("the last object is compared past the bound:\n%.300s", last)
	}
}

func keys(m map[string]Object) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
