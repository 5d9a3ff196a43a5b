package helmexec

import (
	"errors"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chartutil"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
)

// The rendered manifests are bounded in nodes as well as bytes: Helm parses every node
// (sigs.k8s.io/yaml, then the kube client), at up to ~450 bytes a node, so 2 MiB of "0,"
// would cost the executor hundreds of MiB within the byte bound.
func TestMeasureBoundsTheManifestsNodes(t *testing.T) {
	flow := "x: [" + strings.Repeat("0,", bounds.MaxRenderedNodes) + "0]\n"
	if len(flow) > bounds.MaxRenderedBytes/4 {
		t.Fatalf("the test's manifest (%d bytes) should sit well inside the byte bound", len(flow))
	}
	err := measure(map[string]string{"t/cm.yaml": flow})
	if err == nil || !strings.Contains(err.Error(), "nodes") {
		t.Fatalf("a flow list of %d nodes: %v, want refused for its nodes", bounds.MaxRenderedNodes, err)
	}
	// The bound is the whole render's, not each file's.
	half := "x: [" + strings.Repeat("0,", bounds.MaxRenderedNodes/2) + "0]\n"
	if err := measure(map[string]string{"a.yaml": half, "b.yaml": half, "c.yaml": half}); err == nil {
		t.Fatal("three files of half the bound each passed")
	}
	if err := measure(map[string]string{"a.yaml": half}); err != nil {
		t.Fatalf("half the bound: %v", err)
	}
}

// GitLab 6.5.4 renders far inside the node bound.
func TestGitLabRendersInsideTheNodeBound(t *testing.T) {
	gitlabValues, err := chartutil.ReadValuesFile("../../testdata/charts/gitlab-values-offline.yaml")
	if err != nil {
		t.Fatal(err)
	}
	ch := chartDir("gitlab-6.5.4.tgz")(t)
	if err := chartutil.ProcessDependenciesWithMerge(ch, gitlabValues); err != nil {
		t.Fatal(err)
	}
	job := GuardRender{Chart: TreeOf(ch), Values: gitlabValues,
		Release: chartutil.ReleaseOptions{Name: "web", Namespace: "ns", Revision: 1, IsInstall: true}}
	res := renderJob(workerJob{Render: job}, nil)
	files := res.Files
	if res.Failed != "" || len(files) == 0 {
		t.Fatalf("GitLab did not render: %s", res.Error)
	}
	var nodes int64
	for _, f := range files {
		nodes += yamlsize.Nodes([]byte(f))
	}
	t.Logf("GitLab 6.5.4: %d files, %d nodes (bound %d)", len(files), nodes, bounds.MaxRenderedNodes)
	if nodes*4 > bounds.MaxRenderedNodes {
		t.Errorf("GitLab's %d nodes are over a quarter of the bound %d", nodes, bounds.MaxRenderedNodes)
	}
	if err := measure(files); errors.Is(err, yamlsize.ErrTooLarge) || err != nil {
		t.Errorf("GitLab: %v", err)
	}
}
