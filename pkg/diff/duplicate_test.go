package diff

import (
	"errors"
	"strings"
	"testing"
)

// Two documents naming one object (same group, kind, namespace and name, any version) have
// no one answer: an install fails on the second create, an upgrade patches both in turn.
// The diff refuses them, naming the object, instead of showing only the last.
func TestTwoDocumentsNamingOneObjectAreRefused(t *testing.T) {
	cm := func(name, ns, data string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + ns + "\ndata: {k: " + data + "}\n"
	}
	hpa := func(v string) string {
		return "apiVersion: autoscaling/" + v + "\nkind: HorizontalPodAutoscaler\nmetadata:\n  name: web\n"
	}
	for _, tc := range []struct {
		name, before, after, want string
	}{
		{"a ConfigMap twice in the manifest to apply", cm("web", "", "a"), cm("web", "", "a") + "---\n" + cm("web", "", "b"),
			"the manifest to apply: two documents name one object: team, web, ConfigMap (v1)"},
		{"one object under two versions of its API", "", hpa("v1") + "---\n" + hpa("v2"),
			"the manifest to apply: two documents name one object: team, web, HorizontalPodAutoscaler (autoscaling)"},
		{"the namespace written on one and implied on the other", "", cm("web", "", "a") + "---\n" + cm("web", "\n  namespace: team", "b"),
			"two documents name one object: team, web, ConfigMap (v1)"},
		{"twice in the release's manifest", cm("web", "", "a") + "---\n" + cm("web", "", "b"), cm("web", "", "a"),
			"the release's manifest: two documents name one object"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changes, err := Compute(t.Context(), tc.before, tc.after, "team", Options{})
			if !errors.Is(err, ErrDuplicateObject) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("changes %v, err %v; want the error %q", changes, err, tc.want)
			}
		})
	}
	// Objects that differ in any of group, kind, namespace or name are apart.
	apart := cm("web", "", "a") + "---\n" + cm("web", "\n  namespace: other", "a") + "---\n" + cm("db", "", "a") +
		"---\napiVersion: v1\nkind: Secret\nmetadata: {name: web}\n---\napiVersion: example.com/v1\nkind: ConfigMap\nmetadata: {name: web}\n"
	if _, err := Compute(t.Context(), "", apart, "team", Options{}); err != nil {
		t.Errorf("distinct objects refused: %v", err)
	}
}
