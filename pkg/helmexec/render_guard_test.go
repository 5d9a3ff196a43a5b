package helmexec

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
)

// aliasBomb renders a manifest of ~20 KiB whose one anchored 16 KiB string is aliased 1,200
// times (19 MiB once Helm's parser writes the aliases out), padded with plain nodes so that
// the parser's own alias ratio guard lets it through.
func aliasBomb() *chart.Chart {
	ch := tiny("1.0.0")
	ch.Templates = []*chart.File{{Name: "templates/bomb.yaml", Data: []byte(`apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
pad: [{{ range until 1300 }}0,{{ end }}0]
s: &s "{{ repeat 16384 "x" }}"
list: [{{ range until 1200 }}*s,{{ end }}*s]
`)}}
	return ch
}

// Aliases that templates generate are measured before Helm parses the rendered manifests:
// an install of such a chart fails naming the bound, on both engines; a real chart installs.
func TestGeneratedAliasesAreBoundedBeforeHelmParsesThem(t *testing.T) {
	f, mem, opts := offline(t)
	reserve(t, mem, "bomb", 1, helmrelease.StatusPendingInstall)
	_, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "bomb", Revision: 1, Chart: aliasBomb()}, opts...)
	if !errors.Is(err, ErrRenderFailed) || !strings.Contains(err.Error(), ErrManifestsTooLarge.Error()) {
		t.Fatalf("install of a chart whose manifests alias 19 MiB: %v, want %v", err, ErrManifestsTooLarge)
	}
	f4, mem4, opts4 := offlineV4(t)
	reserve(t, mem4, "bomb", 1, helmrelease.StatusPendingInstall)
	if _, err := f4.Install(ctx(t), Request{Namespace: "ns", Name: "bomb", Revision: 1, Chart: aliasBomb()}, opts4...); !errors.Is(err, ErrRenderFailed) {
		t.Fatalf("v4 install of the alias bomb: %v, want %v", err, ErrManifestsTooLarge)
	}
	reserve(t, mem, "web", 1, helmrelease.StatusPendingInstall)
	if _, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: tiny("1.0.0")}, opts...); err != nil {
		t.Fatalf("install of a tiny chart: %v", err)
	}
}

// hooked makes aliasBomb's manifest a pre-install hook.
func hooked(ch *chart.Chart) *chart.Chart {
	t := ch.Templates[0]
	t.Data = []byte(strings.Replace(string(t.Data), "metadata:\n", "metadata:\n  annotations:\n    helm.sh/hook: pre-install\n", 1))
	return ch
}

// crdBomb is a chart whose CRD file, which Helm's install parses as it is, is aliasBomb's
// manifest written out.
func crdBomb() *chart.Chart {
	ch := tiny("1.0.0")
	var b strings.Builder
	b.WriteString("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: bombs.example.com\n")
	b.WriteString("pad: [" + strings.Repeat("0,", 1300) + "0]\n")
	b.WriteString(`s: &s "` + strings.Repeat("x", 16384) + "\"\n")
	b.WriteString("list: [" + strings.Repeat("*s,", 1200) + "*s]\n")
	ch.Files = []*chart.File{{Name: "crds/bomb.yaml", Data: []byte(b.String())}}
	return ch
}

// With render workers, what Helm's install then parses in this process is measured in the
// worker first: the templates' output, hooks too, and the chart's CRD files.
func TestWhatHelmParsesIsMeasuredInTheWorker(t *testing.T) {
	f, mem, opts := offlineOn(t, WithRenderWorkers(workers(t)))
	for i, ch := range []*chart.Chart{aliasBomb(), hooked(aliasBomb()), crdBomb()} {
		name := fmt.Sprintf("bomb%d", i)
		reserve(t, mem, name, 1, helmrelease.StatusPendingInstall)
		_, err := f.Install(ctx(t), Request{Namespace: "ns", Name: name, Revision: 1, Chart: ch}, opts...)
		if !errors.Is(err, ErrRenderFailed) || !strings.Contains(err.Error(), ErrManifestsTooLarge.Error()) {
			t.Errorf("install %d: %v, want %v", i, err, ErrManifestsTooLarge)
		}
	}
}
