package helmexec

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/openapi/openapitest"
	"k8s.io/kube-openapi/pkg/spec3"
)

// kindsOf is every kind a PATCH of the document at path names, read with spec3 (kubectl's
// own decode), so that the lean verifier is held to kubectl's answer kind by kind.
func kindsOf(t *testing.T, gv openapi.GroupVersion) []schema.GroupVersionKind {
	t.Helper()
	b, err := gv.Schema(runtime.ContentTypeJSON)
	if err != nil {
		t.Fatal(err)
	}
	var doc spec3.OpenAPI
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	var kinds []schema.GroupVersionKind
	for _, p := range doc.Paths.Paths {
		if p == nil || p.Patch == nil {
			continue
		}
		var k map[string]string
		if p.Patch.Extensions.GetObject("x-kubernetes-group-version-kind", &k) == nil && k["kind"] != "" {
			kinds = append(kinds, schema.GroupVersionKind{Group: k["group"], Version: k["version"], Kind: k["kind"]})
		}
	}
	return kinds
}

func supportOf(err error) string {
	if err == nil {
		return "supported"
	}
	return err.Error()
}

func TestLeanVerifierAnswersAsKubectlsForEveryKind(t *testing.T) {
	client := openapitest.NewEmbeddedFileClient()
	paths, err := client.Paths()
	if err != nil {
		t.Fatal(err)
	}
	dyn := noCRDs()
	param := resource.QueryParamFieldValidation
	kubectls := resource.NewQueryParamVerifierV3(dyn, client, param)
	learned := map[schema.GroupVersionKind]bool{}
	lean := leanV3Verifier{client: client, param: param, other: kubectls,
		learned: func(k schema.GroupVersionKind) { learned[k] = true }}
	checked, supported := 0, 0
	for path, gv := range paths {
		kinds := kindsOf(t, gv)
		if len(kinds) > 8 { // kubectl decodes the whole document per question
			kinds = kinds[:8]
		}
		if len(kinds) > 0 { // a kind the document does not serve
			kinds = append(kinds, schema.GroupVersionKind{Group: kinds[0].Group, Version: kinds[0].Version, Kind: "NoSuchKind"})
		}
		for _, gvk := range kinds {
			want, got := supportOf(kubectls.HasSupport(gvk)), supportOf(lean.HasSupport(gvk))
			if got != want {
				t.Errorf("%s %s: lean %q, kubectl %q", path, gvk, got, want)
			}
			checked++
			if got == "supported" {
				supported++
			}
		}
	}
	// One decode answers for the group version's other kinds: each learned yes is kubectl's.
	for k := range learned {
		if got := supportOf(kubectls.HasSupport(k)); got != "supported" {
			t.Errorf("learned %s as supported; kubectl says %q", k, got)
		}
	}
	for _, k := range []string{"Secret", "Service", "ServiceAccount"} {
		if !learned[schema.GroupVersionKind{Version: "v1", Kind: k}] {
			t.Errorf("%s was not learned with the core group's document", k)
		}
	}
	list := schema.GroupVersionKind{Version: "v1", Kind: "List"}
	if got, want := supportOf(lean.HasSupport(list)), supportOf(kubectls.HasSupport(list)); got != want {
		t.Errorf("List: lean %q, kubectl %q", got, want)
	}
	if checked < 20 || supported == 0 || supported == checked {
		t.Fatalf("checked %d kinds, %d supported: the embedded documents should give both answers", checked, supported)
	}
}

func TestLeanVerifierReadsReferencedParameters(t *testing.T) {
	gvk := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	doc := func(params string) string {
		return `{"openapi":"3.0.0","paths":{"/apis/example.com/v1/widgets/{name}":{"patch":{
			"x-kubernetes-group-version-kind":{"group":"example.com","version":"v1","kind":"Widget"},
			"parameters":[` + params + `]}}},
			"components":{"parameters":{"fv":{"name":"fieldValidation","in":"query"},"other":{"name":"dryRun","in":"query"}}}}`
	}
	for _, c := range []struct {
		name, params string
		supported    bool
	}{
		{"inline", `{"name":"fieldValidation","in":"query"}`, true},
		{"inline, not a query parameter", `{"name":"fieldValidation","in":"header"}`, false},
		{"referenced", `{"$ref":"#/parameters/fv"}`, true},
		{"referenced, another parameter", `{"$ref":"#/parameters/other"}`, false},
		{"none", ``, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			client := fakeOpenAPI{"apis/example.com/v1": rawSpec(doc(c.params))}
			dyn := noCRDs()
			param := resource.QueryParamFieldValidation
			kubectls := resource.NewQueryParamVerifierV3(dyn, client, param)
			lean := leanV3Verifier{client: client, param: param, other: kubectls}
			got, want := supportOf(lean.HasSupport(gvk)), supportOf(kubectls.HasSupport(gvk))
			if got != want || (got == "supported") != c.supported {
				t.Fatalf("lean %q, kubectl %q, want supported %v", got, want, c.supported)
			}
		})
	}
}

// noCRDs is a dynamic client of a cluster without CRDs (kubectl asks for a kind the index
// does not list).
func noCRDs() *dynamicfake.FakeDynamicClient {
	crds := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{crds: "CustomResourceDefinitionList"})
}

type fakeOpenAPI map[string]openapi.GroupVersion

func (f fakeOpenAPI) Paths() (map[string]openapi.GroupVersion, error) { return f, nil }

func BenchmarkVerifiers(b *testing.B) {
	client := openapitest.NewEmbeddedFileClient()
	param := resource.QueryParamFieldValidation
	kubectls := resource.NewQueryParamVerifierV3(noCRDs(), client, param)
	lean := leanV3Verifier{client: client, param: param, other: kubectls}
	cm := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	b.Run("kubectl", func(b *testing.B) {
		for b.Loop() {
			_ = kubectls.HasSupport(cm)
		}
	})
	b.Run("lean", func(b *testing.B) {
		for b.Loop() {
			_ = lean.HasSupport(cm)
		}
	})
}
