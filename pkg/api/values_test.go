package api

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
)

// A body of 1.25 MiB of `{"x": [{"a":0}, …]}` values (within MaxBodyBytes) decoded to
// 160,000 maps, 48 MiB held per request: the values are counted and refused before they
// are decoded, on every route that decodes a request.
func TestRequestValuesAreBoundedInNodesBeforeTheyDecode(t *testing.T) {
	body := []byte(`{"name":"web","namespace":"mallory","chart_url":"https://x/c.tgz","values":{"x":[` +
		strings.Repeat(`{"a":0},`, 160_000) + `{}]}}`)
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	var r ReleaseRequest
	err := json.Unmarshal(body, &r)
	runtime.ReadMemStats(&m1)
	allocated := (m1.TotalAlloc - m0.TotalAlloc) >> 20
	t.Logf("a body of %d KiB (bound %d KiB): %v; %d MiB allocated", len(body)>>10, MaxBodyBytes>>10, err, allocated)
	if !errors.Is(err, ErrTooManyValues) || allocated > 8 {
		t.Errorf("decode = %v, %d MiB allocated; want ErrTooManyValues before the values are decoded", err, allocated)
	}
	var d DiffRequest
	if err := json.Unmarshal(body, &d); !errors.Is(err, ErrTooManyValues) {
		t.Errorf("a diff request's decode = %v; want ErrTooManyValues", err)
	}
}

// Values within the bound decode as a map did, for every field of the request.
func TestValuesWithinTheBoundDecode(t *testing.T) {
	var d DiffRequest
	err := json.Unmarshal([]byte(`{"name":"web","values":{"a":{"b":[1,"two"]}},"action":"install","version":2}`), &d)
	if err != nil || d.Name != "web" || d.Action != "install" || d.Version != 2 {
		t.Fatalf("decode = %+v, %v", d, err)
	}
	if b, _ := d.Values["a"].(map[string]any)["b"].([]any); len(b) != 2 || b[1] != "two" {
		t.Errorf("values = %#v", d.Values)
	}
}

// Every chart's default values, GitLab 6.5.4's subcharts all together, and its offline
// values are far within MaxValueNodes.
func TestGitLabsValuesAreFarWithinTheNodeBound(t *testing.T) {
	root := filepath.Join("..", "..", "testdata", "charts")
	ch, err := loader.Load(filepath.Join(root, "gitlab-6.5.4.tgz"))
	if err != nil {
		t.Fatal(err)
	}
	var all int64
	var walk func(c *chart.Chart)
	walk = func(c *chart.Chart) {
		raw, err := json.Marshal(c.Values)
		if err != nil {
			t.Fatal(err)
		}
		all += yamlsize.JSONNodes(raw, MaxValueNodes)
		for _, sub := range c.Dependencies() {
			walk(sub)
		}
	}
	walk(ch)
	offline, err := os.ReadFile(filepath.Join(root, "gitlab-values-offline.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("GitLab 6.5.4: the default values of all its charts count %d JSON values, its offline values about %d; bound %d",
		all, yamlsize.Nodes(offline), MaxValueNodes)
	if all > MaxValueNodes/4 || yamlsize.Nodes(offline) > MaxValueNodes/4 {
		t.Errorf("GitLab's values count %d and %d: want far within %d", all, yamlsize.Nodes(offline), MaxValueNodes)
	}
}
