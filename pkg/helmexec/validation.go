package helmexec

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/dynamic"
	cmdutil "k8s.io/kubectl/pkg/cmd/util"
	"k8s.io/kubectl/pkg/util/openapi"
	"k8s.io/kubectl/pkg/validation"
)

// kubeFactory is kubectl's factory for one action's getter (its identity) with one
// change: the validator asks the shared answers whether the server validates a kind's
// fields. kubectl builds that answer per factory by parsing the group version's OpenAPI
// v3 document; per action, that parse was 37% of the executor's CPU in a burst of tiny
// installs (issue 28).
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
	primary := resource.NewQueryParamVerifierV3(v.dyn, v.s.cache.OpenAPIV3(), param)
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
	key := "apis/" + gv.Group + "/" + gv.Version
	if gv.Group == "" {
		key = "api/" + gv.Version
	}
	_, ok := paths[strings.TrimSuffix(key, "/")]
	return ok
}
