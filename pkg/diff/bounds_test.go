package diff

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// Only what names an object is parsed: a body far over MaxDocumentNodes in block style is
// compared as text, and a nested "name:" is not the object's.
func TestOnlyTheHeadIsParsed(t *testing.T) {
	body := strings.Repeat("{a: b},", 3*MaxDocumentNodes)
	doc := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels:\n    name: label\n  name: big\ndata:\n  x: \"" + body + "\"\n"
	objs, err := Parse(context.Background(), doc, "team")
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
	if _, err := Parse(context.Background(), flow, "team"); err == nil || !strings.Contains(err.Error(), "nodes") {
		t.Errorf("flow document over the bound: %v", err)
	}
	var bomb strings.Builder
	bomb.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
	for i := 1; i < 9; i++ {
		fmt.Fprintf(&bomb, "  namespace: &a%d [*a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d, *a%d]\n", i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	if _, err := Parse(context.Background(), bomb.String(), "team"); err == nil || !strings.Contains(err.Error(), "expands") {
		t.Errorf("aliases in a head: %v", err)
	}
	secret := "apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n" + strings.Repeat("  k: eA==\n", MaxDocumentNodes)
	changes, err := Compute(t.Context(), secret, secret+"  z: eA==\n", "team", Options{Context: 3})
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
	changes, err := Compute(t.Context(), before.String(), after.String(), "team", Options{Context: 1})
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

// swapped is an object of n "k<i>: v" lines before, the same lines with neighbours swapped
// after: nearly every line differs in place, the matcher's worst case.
func swapped(n int) (before, after string) {
	head := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n"
	var b, a strings.Builder
	b.WriteString(head)
	a.WriteString(head)
	for i := 0; i < n; i += 2 {
		fmt.Fprintf(&b, "  k%d: v\n  k%d: v\n", i, i+1)
		fmt.Fprintf(&a, "  k%d: v\n  k%d: v\n", i+1, i)
	}
	return b.String(), a.String()
}

// An object whose differing lines are too many on both sides is named, not matched line by
// line, whatever its size in lines; a small change in a large object is still shown.
func TestCostOfAnObjectIsBounded(t *testing.T) {
	before, after := swapped(9_990)
	changes, err := Compute(t.Context(), before, after, "team", Options{Context: 3})
	if err != nil || len(changes) != 1 {
		t.Fatalf("changes %v, %v", changes, err)
	}
	if d := changes[0].Diff; !strings.Contains(d, "too different to compare line by line") {
		t.Errorf("a costly object is compared:\n%.300s", d)
	}
	big := strings.Replace(before, "  k5000: v\n", "  k5000: w\n", 1)
	changes, err = Compute(t.Context(), before, big, "team", Options{Context: 1})
	want := "@@ -5005,3 +5005,3 @@\n   k4999: v\n-  k5000: v\n+  k5000: w\n   k5001: v\n"
	if err != nil || len(changes) != 1 || changes[0].Diff != want {
		t.Errorf("one line changed in a large object: %v\n%s", err, changes[0].Diff)
	}
}

// Objects are compared while the comparison's cost bound lasts, then named only (their
// lines all differ: costly by the bound, cheap to match, so no time bound is reached).
func TestCostOfOneDiffIsBounded(t *testing.T) {
	var before, after strings.Builder
	n := MaxCost/MaxObjectCost + 2
	for i := 0; i < n; i++ {
		fmt.Fprintf(&before, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\ndata:\n", i)
		fmt.Fprintf(&after, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c%d\ndata:\n", i)
		for j := 0; j < 1_400; j++ {
			fmt.Fprintf(&before, "  a%d: v\n", j)
			fmt.Fprintf(&after, "  b%d: v\n", j)
		}
	}
	changes, err := Compute(t.Context(), before.String(), after.String(), "team", Options{Context: 0})
	if err != nil || len(changes) != n {
		t.Fatalf("%d changes, want %d: %v", len(changes), n, err)
	}
	if d := changes[0].Diff; !strings.HasPrefix(d, "@@") {
		t.Errorf("the first object is not compared:\n%.300s", d)
	}
	if d := changes[n-1].Diff; !strings.Contains(d, "past the cost bound of this diff") {
		t.Errorf("the last object is compared past the bound:\n%.300s", d)
	}
}

// A comparison whose context has ended names what changed without comparing it.
func TestEndedComparisonComparesNothing(t *testing.T) {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	before := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\ndata:\n  a: b\n"
	changes, err := Compute(ctx, before, strings.Replace(before, "a: b", "a: c", 1), "team", Options{Context: 3})
	if err != nil || len(changes) != 1 || !strings.Contains(changes[0].Diff, "time bound") {
		t.Fatalf("changes %v, %v", changes, err)
	}
}
