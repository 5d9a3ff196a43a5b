package helmexec

import (
	"context"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
)

// revisionChart uses what an upgrade sets (.Release.Revision, .Release.IsUpgrade), has a
// CRD, a hook the upgrade runs and a test hook it does not.
func revisionChart() *chart.Chart {
	tpl := func(name, data string) *chart.File { return &chart.File{Name: name, Data: []byte(data)} }
	return &chart.Chart{
		Metadata: &chart.Metadata{Name: "rev", Version: "0.1.0", APIVersion: "v2"},
		Values:   map[string]any{"message": "hello"},
		Templates: []*chart.File{
			tpl("templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  revision: {{ .Release.Revision | quote }}\n  upgrade: {{ .Release.IsUpgrade | quote }}\n  message: {{ .Values.message }}\n"),
			tpl("templates/hook.yaml", "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  annotations:\n    helm.sh/hook: pre-install,pre-upgrade\n"),
			tpl("templates/test.yaml", "apiVersion: v1\nkind: Pod\nmetadata:\n  name: smoke\n  annotations:\n    helm.sh/hook: test\n"),
			tpl("templates/NOTES.txt", "notes"),
		},
		Files: []*chart.File{tpl("crds/thing.yaml", "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: things.example.com\n")},
	}
}

// An upgrade renders with the revision it makes and as an upgrade; the CRDs come first, the
// hooks the action runs last, the test hooks not at all.
func TestRenderRevisionIsTheUpgrades(t *testing.T) {
	out, err := RenderRevision(RevisionRender{Namespace: "team", Name: "web", Revision: 3, Upgrade: true,
		Chart: revisionChart(), Values: map[string]any{"message": "changed"}, KubeVersion: "v1.37.2"})
	if err != nil {
		t.Fatal(err)
	}
	want := "---\n# Source: crds/thing.yaml\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: things.example.com\n\n" +
		"---\n# Source: rev/templates/cm.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  revision: \"3\"\n  upgrade: \"true\"\n  message: changed\n" +
		"---\n# Source: rev/templates/hook.yaml\napiVersion: batch/v1\nkind: Job\nmetadata:\n  name: migrate\n  annotations:\n    helm.sh/hook: pre-install,pre-upgrade\n"
	if out != want {
		t.Errorf("got:\n%s\nwant:\n%s", out, want)
	}
}

// An install renders as the template route's dry-run install does, without the test hooks.
func TestRenderRevisionOfAnInstallIsRenders(t *testing.T) {
	vals := map[string]any{"message": "x"}
	got, err := RenderRevision(RevisionRender{Namespace: "team", Name: "web", Revision: 1, Chart: revisionChart(), Values: vals})
	if err != nil {
		t.Fatal(err)
	}
	render, err := Render(context.Background(), RenderRequest{Namespace: "team", Name: "web", Chart: revisionChart(), Values: vals})
	if err != nil {
		t.Fatal(err)
	}
	test := "---\n# Source: rev/templates/test.yaml\napiVersion: v1\nkind: Pod\nmetadata:\n  name: smoke\n  annotations:\n    helm.sh/hook: test\n"
	if !strings.Contains(render, test) || got != strings.Replace(render, test, "", 1) {
		t.Errorf("RenderRevision:\n%s\nRender:\n%s", got, render)
	}
}

// A chart that asks for another Kubernetes is refused as Helm's action refuses it.
func TestRenderRevisionChecksKubeVersion(t *testing.T) {
	ch := revisionChart()
	ch.Metadata.KubeVersion = "<1.20.0"
	if _, err := RenderRevision(RevisionRender{Namespace: "team", Name: "web", Revision: 2, Upgrade: true, Chart: ch, KubeVersion: "v1.37.2"}); err == nil ||
		!strings.Contains(err.Error(), "incompatible with Kubernetes") {
		t.Errorf("got %v", err)
	}
}
