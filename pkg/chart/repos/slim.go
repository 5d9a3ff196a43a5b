package repos

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// slimFields are the fields of a repository object parse and CredentialSecrets read, each
// with its CRD bound (a reference is a ConfigMap's or Secret's name: 253 bytes).
var slimFields = []struct {
	path []string
	max  int
}{
	{[]string{"spec", "disabled"}, 0},
	{[]string{"spec", "name"}, 100},
	{[]string{"spec", "description"}, 2048},
	{[]string{"spec", "connectionConfig", "url"}, 2048},
	{[]string{"spec", "connectionConfig", "ca", "name"}, 253},
	{[]string{"spec", "connectionConfig", "tlsClientConfig", "name"}, 253},
	{[]string{"spec", "connectionConfig", "basicAuthConfig", "name"}, 253},
	{refusedPath, 512},
}

// refusedPath holds why slim refused an object (parse makes it an invalid repository).
var refusedPath = []string{"spec", "refused"}

// slim is what the informers keep of a repository object (cache.TransformFunc): its name,
// namespace and slimFields (a tenant may write 256 KiB of annotations on each); one with a
// field over its bound or of another type is kept refused, with why. slim(slim(o)) is slim(o).
func (s *Set) slim(obj any) (any, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	out := &unstructured.Unstructured{Object: map[string]any{"apiVersion": u.GetAPIVersion(), "kind": u.GetKind()}}
	out.SetName(u.GetName())
	out.SetNamespace(u.GetNamespace())
	out.SetUID(u.GetUID())
	out.SetResourceVersion(u.GetResourceVersion())
	for _, f := range slimFields {
		v, found, _ := unstructured.NestedFieldNoCopy(u.Object, f.path...)
		if !found {
			continue
		}
		if reason := overBound(v, f.max); reason != "" {
			reason = fmt.Sprintf("%s %s: refused", strings.Join(f.path, "."), reason)
			s.Log.Warnw("chart repository object refused", "kind", u.GetKind(), "namespace", u.GetNamespace(),
				"name", u.GetName(), "reason", reason)
			delete(out.Object, "spec")
			_ = unstructured.SetNestedField(out.Object, reason, refusedPath...)
			return out, nil
		}
		_ = unstructured.SetNestedField(out.Object, v, f.path...)
	}
	return out, nil
}

// overBound says why v is not a field slim keeps: a bool (max 0) or a string of max bytes.
func overBound(v any, max int) string {
	switch x := v.(type) {
	case bool:
		if max == 0 {
			return ""
		}
	case string:
		if max > 0 && len(x) > max {
			return fmt.Sprintf("is %d bytes, over %d", len(x), max)
		} else if max > 0 {
			return ""
		}
	}
	return fmt.Sprintf("is a %T", v)
}
