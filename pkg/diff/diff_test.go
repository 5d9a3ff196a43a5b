package diff

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files")

const before = `---
# Source: tiny/templates/all.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
data:
  message: "hello"
  other: "same"
---
# Source: tiny/templates/all.yaml
apiVersion: batch/v1
kind: Job
metadata:
  name: web-migrate-1
spec:
  backoffLimit: 0
---
# Source: tiny/templates/secret.yaml
apiVersion: v1
kind: Secret
metadata:
  name: web-db
data:
  password: aHVudGVyMg==
  user: YXBw
  gone: eA==
---
# Source: tiny/templates/all.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
`

const after = `---
# Source: tiny/templates/all.yaml
apiVersion: v1
kind: ConfigMap
metadata:
  name: web-config
data:
  message: "changed"
  other: "same"
---
# Source: tiny/templates/all.yaml
apiVersion: batch/v1
kind: Job
metadata:
  name: web-migrate-2
spec:
  backoffLimit: 0
---
# Source: tiny/templates/secret.yaml
apiVersion: v1
kind: Secret
metadata:
  name: web-db
stringData:
  token: s3cr3t-token
data:
  password: bmV3LXBhc3N3b3Jk
  user: YXBw
---
# Source: tiny/templates/all.yaml
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
`

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs (go test ./pkg/diff -update):\n%s", name, got)
	}
}

// An upgrade that adds, changes and removes objects, as text and as JSON; a Secret's values
// never show, only whether each changed and its size.
func TestComputeGolden(t *testing.T) {
	for _, tc := range []struct {
		name    string
		context int
	}{{"upgrade", -1}, {"upgrade-context1", 1}} {
		changes, err := Compute(t.Context(), before, after, "team", Options{Context: tc.context})
		if err != nil {
			t.Fatal(err)
		}
		whole, err := Compute(t.Context(), before, after, "team", Options{Context: -1})
		if err != nil {
			t.Fatal(err)
		}
		var text bytes.Buffer
		if err := WriteText(&text, whole, tc.context); err != nil {
			t.Fatal(err)
		}
		golden(t, tc.name+".txt", text.Bytes())
		js, _ := json.MarshalIndent(changes, "", "  ")
		golden(t, tc.name+".json", append(js, '\n'))
		for _, secret := range []string{"aHVudGVyMg", "bmV3LXBhc3N3b3Jk", "YXBw", "s3cr3t-token", "hunter2"} {
			if strings.Contains(text.String()+string(js), secret) {
				t.Errorf("%s shows Secret data %q", tc.name, secret)
			}
		}
	}
}

func TestCompute(t *testing.T) {
	for _, tc := range []struct {
		name, before, after string
		want                []string // change and key
	}{
		{"same", before, before, nil},
		{"install", "", after, []string{
			"ADD team, web, Deployment (apps)", "ADD team, web-config, ConfigMap (v1)",
			"ADD team, web-db, Secret (v1)", "ADD team, web-migrate-2, Job (batch)"}},
		{"uninstall", before, "", []string{
			"REMOVE team, web, Deployment (apps)", "REMOVE team, web-config, ConfigMap (v1)",
			"REMOVE team, web-db, Secret (v1)", "REMOVE team, web-migrate-1, Job (batch)"}},
		{"namespace given", "kind: A\napiVersion: v1\nmetadata: {name: x, namespace: other}\n", "", []string{"REMOVE other, x, A (v1)"}},
		{"comments and empty documents", "---\n# only a comment\n---\n\n---\nkind: A\napiVersion: v1\nmetadata: {name: x}\n", "", []string{"REMOVE team, x, A (v1)"}},
		// Helm matches an object by group, kind, namespace and name: a new version of its API
		// patches it, as helm-diff shows.
		{"an apiVersion bump changes the object", "apiVersion: autoscaling/v2beta2\nkind: HorizontalPodAutoscaler\nmetadata: {name: web}\nspec: {maxReplicas: 2}\n",
			"apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: web}\nspec: {maxReplicas: 2}\n",
			[]string{"MODIFY team, web, HorizontalPodAutoscaler (autoscaling)"}},
		// Helm does not delete an object kept by helm.sh/resource-policy: keep; helm-diff
		// leaves it out of the removed.
		{"a kept object is not removed", "apiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n  name: data\n  annotations:\n    helm.sh/resource-policy: keep\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: gone, annotations: {helm.sh/resource-policy: delete}}\n",
			"", []string{"REMOVE team, gone, ConfigMap (v1)"}},
		{"keep under another key's case is not kept", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n  Annotations:\n    helm.sh/resource-policy: keep\n",
			"", []string{"REMOVE team, x, ConfigMap (v1)"}},
		{"a Secret only re-encoded is unchanged", "kind: Secret\napiVersion: v1\nmetadata: {name: s}\ndata: {a: eA==}\n",
			"apiVersion: v1\nkind: Secret\nmetadata:\n  name: s\ndata:\n  a: eA==\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changes, err := Compute(t.Context(), tc.before, tc.after, "team", Options{Context: 3})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, c := range changes {
				got = append(got, c.Change+" "+c.Key())
			}
			if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
				t.Errorf("changes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
		})
	}
}

// A document that does not parse is an error, not a guess.
func TestComputeRefusesBadYAML(t *testing.T) {
	if _, err := Compute(t.Context(), "kind: [\n", "", "team", Options{}); err == nil {
		t.Fatal("no error for a manifest that does not parse")
	}
}

// A huge object is reported changed without a line-by-line diff.
func TestHugeObjectIsNotComparedLineByLine(t *testing.T) {
	big := "kind: ConfigMap\napiVersion: v1\nmetadata: {name: big}\ndata:\n" + strings.Repeat("  k: v\n", MaxObjectLines)
	changes, err := Compute(t.Context(), big, big+"  z: w\n", "team", Options{Context: 3})
	if err != nil || len(changes) != 1 || !strings.Contains(changes[0].Diff, "not compared line by line") {
		t.Fatalf("changes %v, %v", changes, err)
	}
}
