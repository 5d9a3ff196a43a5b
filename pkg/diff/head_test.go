package diff

import (
	"context"
	"strings"
	"testing"
)

// An object is named as the apply decodes it (YAML to JSON, exact keys, the last key
// wins), whatever the document's style: the diff never shows another object than the one
// applied.
func TestObjectsAreNamedAsTheApplyReadsThem(t *testing.T) {
	for _, tc := range []struct{ name, doc, want string }{
		{"quoted kind after a plain one", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: creds\n\"kind\": Secret\n", "team, creds, Secret (v1)"},
		{"single-quoted apiVersion", "apiVersion: v1\nkind: Role\n'apiVersion': rbac.authorization.k8s.io/v1\nmetadata:\n  name: r\n", "team, r, Role (rbac.authorization.k8s.io)"},
		{"a key of another case is another key", "{apiVersion: v1, kind: ConfigMap, Kind: Secret, metadata: {name: x}}\n", "team, x, ConfigMap (v1)"},
		{"quoted name in metadata", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  \"name\": b\n", "team, b, ConfigMap (v1)"},
		{"folded name", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: >-\n    real\n", "team, real, ConfigMap (v1)"},
		{"plain name going on", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n    b\n", "team, a b, ConfigMap (v1)"},
		{"merged metadata", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  <<: {namespace: other}\n  name: m\n", "other, m, ConfigMap (v1)"},
		{"a second metadata wins", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\nmetadata:\n  name: b\n", "team, b, ConfigMap (v1)"},
		{"plain block style", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  labels:\n    name: label\n  name: big\ndata:\n  x: |\n    \"kind\": Secret\n", "team, big, ConfigMap (v1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := Parse(context.Background(), tc.doc, "team")
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := objs[tc.want]; !ok || len(objs) != 1 {
				t.Errorf("objects %v, want [%s]", keys(objs), tc.want)
			}
		})
	}
}

// A Secret written with a quoted kind is masked, and an object disguised under the name of
// another shows as what it is.
func TestDisguisedObjectsShow(t *testing.T) {
	secret := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: creds\n\"kind\": Secret\nstringData:\n  password: hunter2\n"
	changes, err := Compute(t.Context(), "", secret, "team", Options{Context: 3})
	if err != nil || len(changes) != 1 {
		t.Fatalf("changes %v, %v", changes, err)
	}
	if strings.Contains(changes[0].Diff, "hunter2") {
		t.Errorf("a Secret with a quoted kind shows its value:\n%s", changes[0].Diff)
	}
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\ndata:\n  a: b\n"
	binding := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n\"apiVersion\": rbac.authorization.k8s.io/v1\n\"kind\": ClusterRoleBinding\nroleRef: {kind: ClusterRole, name: cluster-admin}\n"
	changes, err = Compute(t.Context(), cm, cm+"---\n"+binding, "team", Options{Context: 3})
	if err != nil || len(changes) != 1 || !strings.Contains(changes[0].Kind, "ClusterRoleBinding") {
		t.Fatalf("a ClusterRoleBinding named like a ConfigMap: changes %v, %v", changes, err)
	}
}
