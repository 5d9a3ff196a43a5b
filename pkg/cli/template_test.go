package cli

import "testing"

// template prints submit's render as helm template does: the chart's CRDs only with
// --include-crds.
func TestTemplate(t *testing.T) {
	runTestCmd(t, []cmdTestCase{
		{name: "name and chart", cmd: "template web https://charts.example.com/tiny-0.1.0.tgz --set message=hi", golden: "template.txt"},
		{name: "chart only: release-name", cmd: "template https://charts.example.com/tiny-0.1.0.tgz", golden: "template-release-name.txt"},
		{name: "--include-crds", cmd: "template web https://charts.example.com/tiny-0.1.0.tgz --include-crds", golden: "template-crds.txt"},
		{name: "no chart", cmd: "template", golden: "template-noargs.txt", wantErr: true},
	})
}

func TestWithoutCRDs(t *testing.T) {
	doc := func(src string) string { return "---\n# Source: " + src + "\nkind: X\n" }
	for _, tc := range []struct{ name, in, want string }{
		{"none", doc("tiny/templates/a.yaml"), doc("tiny/templates/a.yaml")},
		{"the chart's", doc("tiny/crds/c.yaml") + doc("tiny/templates/a.yaml"), doc("tiny/templates/a.yaml")},
		{"a subchart's", doc("tiny/charts/sub/crds/c.yaml") + doc("tiny/charts/sub/templates/a.yaml"), doc("tiny/charts/sub/templates/a.yaml")},
		{"a path without the chart", doc("crds/c.yaml") + doc("tiny/templates/a.yaml"), doc("tiny/templates/a.yaml")},
		{"a template directory named crds", doc("tiny/templates/crds/a.yaml"), doc("tiny/templates/crds/a.yaml")},
		{"a hook after the manifest", doc("tiny/templates/a.yaml") + doc("tiny/crds/c.yaml") + doc("tiny/templates/hook.yaml"),
			doc("tiny/templates/a.yaml") + doc("tiny/templates/hook.yaml")},
		{"empty", "", ""},
	} {
		if got := withoutCRDs(tc.in); got != tc.want {
			t.Errorf("%s: got\n%s\nwant\n%s", tc.name, got, tc.want)
		}
	}
}
