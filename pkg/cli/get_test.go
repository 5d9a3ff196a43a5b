package cli

import "testing"

// get values|manifest|notes|hooks|all as helm v3.21 prints them (the golden files were
// checked against helm's own output on the same records: e2e TestOcHelmReadsAsHelms).
func TestGet(t *testing.T) {
	runTestCmd(t, []cmdTestCase{
		{name: "values", cmd: "get values web", golden: "get-values.txt"},
		{name: "values -a", cmd: "get values web -a", golden: "get-values-all.txt"},
		{name: "values json", cmd: "get values web -o json", golden: "get-values.json"},
		{name: "values of a revision, yaml", cmd: "get values web --revision 1 -o yaml", golden: "get-values-rev1.yaml"},
		{name: "manifest", cmd: "get manifest web", golden: "get-manifest.txt"},
		{name: "manifest of a revision", cmd: "get manifest web --revision 1", golden: "get-manifest-rev1.txt"},
		{name: "notes", cmd: "get notes web", golden: "get-notes.txt"},
		{name: "hooks", cmd: "get hooks web", golden: "get-hooks.txt"},
		{name: "all", cmd: "get all web", golden: "get-all.txt"},
		{name: "all --template", cmd: "get all web --template {{.Release.Name}}-{{.Release.Version}}", golden: "get-all-template.txt"},
		{name: "a revision that does not exist", cmd: "get manifest web --revision 9", golden: "get-missing-revision.txt", wantErr: true},
		{name: "a release that does not exist", cmd: "get values ghost", golden: "get-missing.txt", wantErr: true},
		{name: "a bad template", cmd: "get all web --template {{.Release", golden: "get-bad-template.txt", wantErr: true},
	})
}
