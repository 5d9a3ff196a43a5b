package helmexec

import (
	"context"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
)

// A chart's schema that refers to another document made Helm fetch it from wherever the
// action ran: any URL from the executor's network (an unbounded body: 300 MiB streamed took
// the executor to 1.4 GB) and any file of its disk ("file:///..."). Neither is followed now:
// the chart runs without Helm's schema check, as submit does not check it either, and a
// self-contained schema is still checked.
func TestSchemaReferencesAreNotFollowed(t *testing.T) {
	var fetched atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		_, _ = w.Write([]byte(`{"type": "string"}`))
	}))
	defer srv.Close()
	load := func(schema string) *chart.Chart {
		ch, err := loader.LoadDir(filepath.Join("..", "..", "testdata", "charts", "tiny"))
		if err != nil {
			t.Fatal(err)
		}
		ch.Schema = []byte(schema)
		return ch
	}
	for name, schema := range map[string]string{
		"url":  `{"properties": {"message": {"$ref": "` + srv.URL + `/s.json"}}}`,
		"file": `{"properties": {"message": {"$ref": "file:///etc/hostname"}}}`,
		"meta": `{"$schema": "` + srv.URL + `/meta.json", "type": "object"}`,
	} {
		if _, err := Render(context.Background(), RenderRequest{Namespace: "n", Name: "web", Chart: load(schema),
			Values: map[string]any{"message": "hi"}}); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if n := fetched.Load(); n != 0 {
		t.Errorf("the schema's references were fetched %d times", n)
	}
	_, err := Render(context.Background(), RenderRequest{Namespace: "n", Name: "web",
		Chart: load(`{"properties": {"message": {"type": "integer"}}}`), Values: map[string]any{"message": "hi"}})
	if err == nil || !strings.Contains(err.Error(), "message") {
		t.Errorf("a self-contained schema the values break: %v, want Helm's schema error", err)
	}
}

// Patterns a schema compiles, and values it checks as regular expressions, are bounded.
func TestSchemaPatternsAreBounded(t *testing.T) {
	long := strings.Repeat("a", MaxPatternBytes+1)
	if _, _, err := compileSchema([]byte(`{"pattern": "` + long + `"}`)); err == nil {
		t.Error("a pattern over MaxPatternBytes compiled")
	}
	s, _, err := compileSchema([]byte(`{"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"x": {"format": "regex"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(map[string]any{"x": long}); err == nil {
		t.Error("a value over MaxPatternBytes checked as a regular expression passed")
	}
	if err := s.Validate(map[string]any{"x": "^a+$"}); err != nil {
		t.Errorf("a short regular expression: %v", err)
	}
}

// Whether a compile of ours calls its loader does not tell whether Helm's will: jsonschema
// v6 compiles subschemas in map order, and a "$ref" an "$id" elsewhere satisfies is loaded
// or not, run to run. The text decides now: none of 30 renders fetches.
// Schemas written to blow a compile up fail before Helm's compiler runs, and a schema that
// checks values as regular expressions is left to our bounded compiler.
func TestSchemaTextDecidesBeforeHelmCompiles(t *testing.T) {
	var fetched atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fetched.Add(1)
		_, _ = w.Write([]byte(`{}`))
	}))
	defer srv.Close()
	render := func(schema string, values map[string]any) error {
		ch, err := loader.LoadDir(filepath.Join("..", "..", "testdata", "charts", "tiny"))
		if err != nil {
			t.Fatal(err)
		}
		ch.Schema = []byte(schema)
		_, err = Render(context.Background(), RenderRequest{Namespace: "n", Name: "web", Chart: ch, Values: values})
		return err
	}
	racy := `{"properties": {"a": {"$ref": "#/x/a"}, "b": {"properties": {"c": {"$ref": "` + srv.URL + `/x"}}},
		"d": {"$ref": "#/x/a"}, "e": {"$ref": "#/x/a"}}, "x": {"a": {"$id": "` + srv.URL + `/x"}}}`
	for i := 0; i < 30; i++ {
		if err := render(racy, nil); err != nil {
			t.Fatal(err)
		}
	}
	if n := fetched.Load(); n != 0 {
		t.Errorf("a reference an $id may satisfy was fetched %d times in 30 renders", n)
	}
	for schema, want := range map[string]string{
		`{"allOf": [{"type": "object"}], "properties": {"a": {"$ref": "#/allOf/00"}}}`: "array index",
		`{"properties": {"a": {"$ref": "#/allOf/-0"}}, "allOf": [{}]}`:                 "array index",
		`{"properties": {"a": {"multipleOf": 1e1000000}}}`:                             "exponent",
	} {
		if err := render(schema, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error naming %q", schema, err, want)
		}
	}
	if err := render(`{"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"message": {"format": "regex"}}}`,
		map[string]any{"message": "("}); err != nil {
		t.Errorf("a format regex schema ran Helm's check: %v", err)
	}
}
