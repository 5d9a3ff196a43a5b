package storage

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
)

// record is revision 1 of web with manifest and hooks, as the memory driver keeps it.
func record(manifest string, hooks ...string) *helmrelease.Release {
	r := rel(1, helmrelease.StatusDeployed)
	r.Manifest = manifest
	for _, h := range hooks {
		r.Hooks = append(r.Hooks, &helmrelease.Hook{Manifest: h})
	}
	return r
}

// helmsManifest is docs as Helm writes them into a record, each under its source's header.
func helmsManifest(docs ...string) string {
	var b strings.Builder
	for i, d := range docs {
		fmt.Fprintf(&b, "---\n# Source: web-app/templates/a-b-c-d-%d.yaml\n%s\n", i, d)
	}
	return b.String()
}

func TestMeasure(t *testing.T) {
	bomb := "a: &a \"" + strings.Repeat("A", 1<<20) + "\"\nb: [*a" + strings.Repeat(", *a", 19) + "]" // 20 MiB written out
	flow := func(n int) string { return "x: [" + strings.Repeat("0,", n) + "0]" }
	// 100,000 documents of two nodes each: 200,000 nodes as rendered; Helm's headers
	// around them hold ten times as many of the bytes a node may start after.
	many := make([]string, 100_000)
	for i := range many {
		many[i] = "k: v"
	}
	cases := []struct {
		name string
		rls  *helmrelease.Release
		ok   bool
	}{
		{"Helm's documents", record(helmsManifest("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a", "kind: Service")), true},
		{"an anchor aliased a few times", record(helmsManifest("a: &a [1, 2]\nb: *a\nc: *a")), true},
		{"empty", record(""), true},
		{"an alias bomb", record(helmsManifest(bomb)), false},
		{"an alias bomb in a hook", record(helmsManifest("kind: ConfigMap"), bomb), false},
		{"a flow list over the nodes", record(helmsManifest(flow(bounds.MaxRenderedNodes))), false},
		{"manifest and hooks over the nodes together", record(helmsManifest(flow(bounds.MaxRenderedNodes/2)), flow(bounds.MaxRenderedNodes/2)), false},
		{"half the nodes", record(helmsManifest(flow(bounds.MaxRenderedNodes / 2))), true},
		{"many documents: their headers are not counted", record(helmsManifest(many...)), true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := Measure(c.rls)
			if c.ok && err != nil {
				t.Errorf("refused: %v", err)
			}
			if !c.ok && !errors.Is(err, ErrManifestsTooLarge) {
				t.Errorf("%v, want ErrManifestsTooLarge", err)
			}
		})
	}
}

// The wrapper refuses every read that would hand Helm a record over the bounds; a delete
// (Helm does not parse what it deletes) passes.
func TestMeasuredRefusesReadsOfARecordOverTheBounds(t *testing.T) {
	big := record(helmsManifest("x: [" + strings.Repeat("0,", bounds.MaxRenderedNodes) + "0]"))
	d := Measured(memWith(t, big))
	if _, err := d.Get(Key("web", 1)); !errors.Is(err, ErrManifestsTooLarge) {
		t.Errorf("Get: %v", err)
	}
	if _, err := d.List(func(*helmrelease.Release) bool { return true }); !errors.Is(err, ErrManifestsTooLarge) {
		t.Errorf("List: %v", err)
	}
	if _, err := d.Query(map[string]string{"name": "web", "owner": "helm"}); !errors.Is(err, ErrManifestsTooLarge) {
		t.Errorf("Query: %v", err)
	}
	if _, err := d.List(func(*helmrelease.Release) bool { return false }); err != nil {
		t.Errorf("a List that returns nothing: %v", err)
	}
	if _, err := d.Delete(Key("web", 1)); err != nil {
		t.Errorf("Delete: %v", err)
	}
	// A record measured once is known by its content: rewritten between two reads, it is
	// measured again.
	mem := memWith(t, record(helmsManifest("kind: ConfigMap")))
	d = Measured(mem)
	if _, err := d.Get(Key("web", 1)); err != nil {
		t.Fatalf("Get: %v", err)
	}
	if err := mem.Update(Key("web", 1), big); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Get(Key("web", 1)); !errors.Is(err, ErrManifestsTooLarge) {
		t.Errorf("Get of the record rewritten after its first read: %v", err)
	}
}
