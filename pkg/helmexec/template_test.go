package helmexec

import (
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart/loader"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata/")

// golden compares got with testdata/name, or rewrites it with -update (as Helm's cmd tests).
func golden(t *testing.T, name, got string) {
	t.Helper()
	p := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(p, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("%v (run with -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs:\n--- got\n%s\n--- want\n%s", name, got, want)
	}
}

// A dry run renders the manifest and the hooks with the release's name, namespace and
// values, without a cluster; a failing template is an error, not a partial answer.
func TestRender(t *testing.T) {
	tiny, err := loader.LoadDir(filepath.Join("..", "..", "testdata", "charts", "tiny"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := Render(context.Background(), RenderRequest{Namespace: "team-a", Name: "web", Chart: tiny,
		Values: map[string]any{"message": "previewed"}, KubeVersion: "v1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "name: web-config") || !strings.Contains(out, `message: "previewed"`) {
		t.Errorf("render lacks the release's name or values:\n%s", out)
	}
	golden(t, "render-tiny.golden", out)

	hooks, err := loader.LoadDir(filepath.Join("..", "..", "testdata", "charts", "hookfail"))
	if err != nil {
		t.Fatal(err)
	}
	out, err = Render(context.Background(), RenderRequest{Namespace: "team-a", Name: "h", Chart: hooks})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "# Source: hookfail/templates/hook.yaml") {
		t.Errorf("hook not printed:\n%s", out)
	}

	bad, err := loader.LoadDir(filepath.Join("..", "..", "testdata", "charts", "badtemplate"))
	if err != nil {
		t.Fatal(err)
	}
	if out, err := Render(context.Background(), RenderRequest{Namespace: "team-a", Name: "b", Chart: bad}); err == nil {
		t.Errorf("a broken template rendered:\n%s", out)
	}
	if _, err := Render(context.Background(), RenderRequest{Name: "x", Chart: tiny, KubeVersion: "not-a-version"}); err == nil {
		t.Error("a bad kube version was accepted")
	}
}
