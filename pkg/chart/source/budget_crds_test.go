package source

import (
	"errors"
	"strings"
	"testing"

	"github.com/async-helm/async-helm/internal/testcharts/hostile"
)

// denseCRD is a CustomResourceDefinition whose body is a flow list of items "0,": 2 bytes
// a node, each ~216 bytes once Helm's install has built it.
func denseCRD(items int) []byte {
	return []byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  name: bigs.example.com\nx: [" +
		strings.Repeat("0,", items) + "0]\n")
}

// Helm's install builds every crds/ file with its kube client (installCRDs: the whole
// document turned into JSON) in the executor, before any API call could refuse the tenant
// a CRD; a 5 MiB file of "0," grew the executor's peak RSS by 541 MiB, charged nothing. The
// budget charges crds/ files as parsed YAML, their nodes against MaxCRDNodes, in subcharts
// too, and their aliases written out.
func TestCRDFilesAreCharged(t *testing.T) {
	over := denseCRD(int(DefaultBudget.MaxCRDNodes))
	refusedWithin(t, tgz(t, chartYAML("crds"), entry{Name: "crds/crds/big.yaml", Data: over}),
		"YAML nodes in its crds/ files", 16<<20)

	sub := tgz(t, chartYAML("sub"), entry{Name: "sub/crds/a/big.json", Data: over})
	if _, err := (Budget{}).Load(tgz(t, chartYAML("top"), entry{Name: "top/charts/sub-0.1.0.tgz", Data: sub})); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a dense crds/ file in a subchart archive: %v, want ErrTooLarge", err)
	}
	inDir := tgz(t, chartYAML("top"), entry{Name: "top/charts/dir/Chart.yaml", Data: []byte("apiVersion: v2\nname: dir\nversion: 0.1.0\n")}, entry{Name: "top/charts/dir/crds/big.yml", Data: over})
	if _, err := (Budget{}).Load(inDir); !errors.Is(err, ErrTooLarge) {
		t.Errorf("a dense crds/ file in a directory subchart: %v, want ErrTooLarge", err)
	}
	aliased := tgz(t, chartYAML("aliased"), entry{Name: "aliased/crds/bomb.yaml", Data: hostile.AliasBomb("kind: CustomResourceDefinition\n", 1<<20, 200)})
	refusedWithin(t, aliased, "once its YAML aliases are written out", 32<<20)

	// Two files within the bound each are refused together; one loads, and so does a file
	// Helm's install does not read (no manifest extension) or one outside crds/.
	half := denseCRD(int(DefaultBudget.MaxCRDNodes) * 2 / 3)
	two := tgz(t, chartYAML("two"), entry{Name: "two/crds/a.yaml", Data: half}, entry{Name: "two/crds/b.yaml", Data: half})
	if _, err := (Budget{}).Load(two); !errors.Is(err, ErrTooLarge) {
		t.Errorf("two crds/ files of 2/3 of the bound each: %v, want ErrTooLarge", err)
	}
	one := tgz(t, chartYAML("one"), entry{Name: "one/crds/a.yaml", Data: half},
		entry{Name: "one/crds/README.md", Data: half}, entry{Name: "one/files/crds/b.yaml", Data: half})
	ch, err := (Budget{}).Load(one)
	if err != nil {
		t.Fatalf("one crds/ file of 2/3 of the bound: %v", err)
	}
	if n := len(ch.CRDObjects()); n != 1 {
		t.Errorf("%d CRD files loaded, want 1", n)
	}
}
