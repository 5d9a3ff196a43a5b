package knative

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// Each function tells Go's GC its container's memory limit (GOMEMLIMIT, a fifth or so
// below it): without it the heap doubles past its live size before a collection, and a
// parse within every bound left garbage enough to pass the limit.
func TestEachFunctionSetsGOMEMLIMITBelowItsLimit(t *testing.T) {
	seen := 0
	for _, u := range manifests(t) {
		if u.GetKind() != "Service" || u.GetAPIVersion() != "serving.knative.dev/v1" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			c := c.(map[string]any)
			limit, _, _ := unstructured.NestedString(c, "resources", "limits", "memory")
			q, err := resource.ParseQuantity(limit)
			if err != nil {
				t.Errorf("%s: memory limit %q: %v", u.GetName(), limit, err)
				continue
			}
			env, _, _ := unstructured.NestedSlice(c, "env")
			gomem := ""
			for _, e := range env {
				if e := e.(map[string]any); e["name"] == "GOMEMLIMIT" {
					gomem, _ = e["value"].(string)
				}
			}
			g, err := resource.ParseQuantity(strings.TrimSuffix(gomem, "B"))
			if err != nil || g.Value() >= q.Value()*9/10 || g.Value() < q.Value()/2 {
				t.Errorf("%s: GOMEMLIMIT %q against a limit of %s, want 50-90%% of it (%v)", u.GetName(), gomem, limit, err)
			}
			seen++
		}
	}
	if seen != 3 {
		t.Errorf("%d function containers checked, want 3", seen)
	}
}
