package diff

import (
	"strings"
	"testing"
)

// The lines print as helm-diff's printDiffRecords prints them: its own TestPrintDiffWithContext
// cases (databus23/helm-diff diff/diff_test.go), with the final newline every object's text
// has here (helm-diff then prints an unchanged empty line last, or "..." when it is left out).
func TestTextIsHelmDiffs(t *testing.T) {
	text1 := "line1\nline2\nline3\nline4\nline5\nline6\nline7\nline8\nline9\nline10\n"
	text2 := "line1 - different!\nline2 - different!\nline3\nline4\nline5\nline6\nline7\nline8 - different!\nline9\nline10\n"
	head := "- line1\n- line2\n+ line1 - different!\n+ line2 - different!\n"
	for _, tc := range []struct {
		context int
		want    string
	}{
		{-1, head + "  line3\n  line4\n  line5\n  line6\n  line7\n- line8\n+ line8 - different!\n  line9\n  line10\n\n"},
		{0, head + "...\n- line8\n+ line8 - different!\n...\n"},
		{1, head + "  line3\n...\n  line7\n- line8\n+ line8 - different!\n  line9\n...\n"},
		{2, head + "  line3\n  line4\n...\n  line6\n  line7\n- line8\n+ line8 - different!\n  line9\n  line10\n...\n"},
		{3, head + "  line3\n  line4\n  line5\n  line6\n  line7\n- line8\n+ line8 - different!\n  line9\n  line10\n\n"},
	} {
		left := budget{lines: MaxLines, cost: MaxCost, ctx: t.Context()}
		c := Change{API: "v1", Kind: "ConfigMap", Namespace: "team", Name: "web", Change: Modify, Diff: unified(text1, text2, -1, &left)}
		var b strings.Builder
		if err := WriteText(&b, []Change{c}, tc.context); err != nil {
			t.Fatal(err)
		}
		want := "team, web, ConfigMap (v1) has changed:\n" + tc.want
		if b.String() != want {
			t.Errorf("context %d:\n%s\nwant:\n%s", tc.context, b.String(), want)
		}
	}
}

// Hunks of fewer lines than the object print with "..." where lines are missing; a note
// instead of lines prints as it is.
func TestTextOfHunksAndNotes(t *testing.T) {
	left := budget{lines: MaxLines, cost: MaxCost, ctx: t.Context()}
	from := "a\nb\nc\nd\ne\nf\ng\n"
	hunks := unified(from, strings.Replace(strings.Replace(from, "b", "B", 1), "f", "F", 1), 0, &left)
	note := "# changed: 1 lines before, 2 after (over 20000 lines: not compared line by line)\n"
	var b strings.Builder
	if err := WriteText(&b, []Change{{Name: "x", Kind: "A", API: "v1", Change: Modify, Diff: hunks}, {Name: "y", Kind: "A", API: "v1", Change: Add, Diff: note}}, -1); err != nil {
		t.Fatal(err)
	}
	want := ", x, A (v1) has changed:\n...\n- b\n+ B\n...\n- f\n+ F\n\n, y, A (v1) has been added:\n" + note
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}
