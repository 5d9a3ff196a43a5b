package helmexec

import (
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/dynamic"
	openapiclient "k8s.io/client-go/openapi"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/openapi"
	"k8s.io/kubectl/pkg/validation"
)

// kubeFactory is kubectl's factory for one action's getter (its identity), its validator
// asking the shared answers whether the server validates a kind's fields: kubectl parses
// the group version's OpenAPI v3 document per factory.
type kubeFactory struct {
	cmdutil.Factory
	s      *sharedDiscovery
	budget *missBudget
}

// Validator is kubectl's (cmdutil factoryImpl.Validator), the verifier shared.
func (f kubeFactory) Validator(directive string) (validation.Schema, error) {
	if directive == metav1.FieldValidationIgnore {
		return validation.NullSchema{}, nil
	}
	dyn, err := f.DynamicClient()
	if err != nil {
		return nil, err
	}
	schema := validation.ConjunctiveSchema{validation.NewSchemaValidation(f.Factory), validation.NoDoubleKeySchema{}}
	return validation.NewParamVerifyingSchema(schema, sharedVerifier{s: f.s, dyn: dyn, budget: f.budget}, directive), nil
}

// sharedVerifier answers whether the server supports fieldValidation for a kind. A yes is
// a fact about the server and is kept for every action; a no (the action then validates
// on the client, as kubectl does) is not kept: it may come from this caller not being
// allowed to list CRDs (the action's own dynamic client asks).
type sharedVerifier struct {
	s      *sharedDiscovery
	dyn    dynamic.Interface
	budget *missBudget
}

func (v sharedVerifier) HasSupport(gvk schema.GroupVersionKind) error {
	if _, ok := v.s.verified.Get(gvk); ok {
		return nil
	}
	seen := v.s.gen.Load()
	if !v.s.published(gvk.GroupVersion()) {
		v.budget.refresh(v.s, seen) // a group version created since the index was fetched (a new CRD)
	}
	param := resource.QueryParamFieldValidation
	v3 := v.s.cache.OpenAPIV3()
	primary := leanV3Verifier{client: v3, param: param, other: resource.NewQueryParamVerifierV3(v.dyn, v3, param),
		learned: func(k schema.GroupVersionKind) { v.s.verified.Add(k, struct{}{}) }}
	secondary := resource.NewQueryParamVerifier(v.dyn, openapi.NewOpenAPIGetter(v.s.cache), param)
	err := resource.NewFallbackQueryParamVerifier(primary, secondary).HasSupport(gvk)
	if err == nil {
		v.s.verified.Add(gvk, struct{}{})
	}
	return err
}

// published says whether the cached OpenAPI v3 index lists gv (true when it cannot say).
func (s *sharedDiscovery) published(gv schema.GroupVersion) bool {
	paths, err := s.cache.OpenAPIV3().Paths()
	if err != nil {
		return true
	}
	_, ok := paths[gvPath(gv)]
	return ok
}

// gvPath is gv's key in the OpenAPI v3 index.
func gvPath(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return strings.TrimSuffix("apis/"+gv.Group+"/"+gv.Version, "/")
}

// leanV3Verifier answers as kubectl's queryParamVerifierV3 does, decoding only each path's
// PATCH kind and parameters, not the whole document into spec3 types. A group version the
// index does not list (a CRD's) goes to kubectl's own (other). learned gets each kind of
// the group version whose every PATCH takes the parameter.
type leanV3Verifier struct {
	client  openapiclient.Client
	param   resource.VerifiableQueryParam
	other   resource.Verifier
	learned func(schema.GroupVersionKind)
}

func (v leanV3Verifier) HasSupport(gvk schema.GroupVersionKind) error {
	if (gvk == schema.GroupVersionKind{Version: "v1", Kind: "List"}) {
		return resource.NewParamUnsupportedError(gvk, v.param)
	}
	paths, err := v.client.Paths()
	if err != nil {
		return v.other.HasSupport(gvk)
	}
	gv, ok := paths[gvPath(gvk.GroupVersion())]
	if !ok {
		return v.other.HasSupport(gvk)
	}
	b, err := gv.Schema(runtime.ContentTypeJSON)
	if err != nil {
		return err
	}
	var doc patchParams
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("decode the OpenAPI v3 document of %s: %w", gvk.GroupVersion(), err)
	}
	if v.learned != nil {
		for _, k := range doc.supportedKinds(gvk.GroupVersion(), v.param) {
			v.learned(k)
		}
	}
	return doc.supports(gvk, v.param)
}

// patchParams is the part of an OpenAPI v3 document that says which query parameters a
// kind's PATCH takes.
type patchParams struct {
	Paths map[string]*struct {
		Patch *struct {
			GVK        *schema.GroupVersionKind `json:"x-kubernetes-group-version-kind"`
			Parameters []openAPIParam           `json:"parameters"`
		} `json:"patch"`
	} `json:"paths"`
	Components *struct {
		Parameters map[string]*openAPIParam `json:"parameters"`
	} `json:"components"`
}

type openAPIParam struct {
	Name string `json:"name"`
	In   string `json:"in"`
	Ref  string `json:"$ref"`
}

// supports is kubectl's supportsQueryParamV3 over patchParams.
func (d patchParams) supports(gvk schema.GroupVersionKind, param resource.VerifiableQueryParam) error {
	if d.Paths == nil {
		return fmt.Errorf("Invalid OpenAPI V3 document")
	}
	for _, p := range d.Paths {
		if p == nil || p.Patch == nil || p.Patch.GVK == nil || *p.Patch.GVK != gvk {
			continue
		}
		if d.takes(p.Patch.Parameters, param) {
			return nil
		}
		return resource.NewParamUnsupportedError(gvk, param)
	}
	return fmt.Errorf("Path not found for GVK (%s) in OpenAPI V3 doc", gvk)
}

// supportedKinds is every kind of gv whose every PATCH takes param: kubectl's answer for
// them does not depend on which of their paths it reads first. (A document also names
// other groups' kinds, as apps/v1's scale subresource names autoscaling/v1's Scale; kubectl
// answers for those from their own group's document.)
func (d patchParams) supportedKinds(gv schema.GroupVersion, param resource.VerifiableQueryParam) []schema.GroupVersionKind {
	all := map[schema.GroupVersionKind]bool{}
	for _, p := range d.Paths {
		if p == nil || p.Patch == nil || p.Patch.GVK == nil || p.Patch.GVK.GroupVersion() != gv {
			continue
		}
		k := *p.Patch.GVK
		ok, seen := all[k]
		all[k] = d.takes(p.Patch.Parameters, param) && (ok || !seen)
	}
	var kinds []schema.GroupVersionKind
	for k, ok := range all {
		if ok {
			kinds = append(kinds, k)
		}
	}
	return kinds
}

// takes says whether params hold param as a query parameter, inline or by reference.
func (d patchParams) takes(params []openAPIParam, param resource.VerifiableQueryParam) bool {
	for _, prm := range params {
		if prm.Name == string(param) && prm.In == "query" {
			return true
		}
		if k, ok := strings.CutPrefix(prm.Ref, "#/parameters/"); ok && d.Components != nil {
			if g := d.Components.Parameters[k]; g != nil && g.In == "query" && g.Name == string(param) {
				return true
			}
		}
	}
	return false
}
