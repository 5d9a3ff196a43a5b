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
	if _, _, err := CompileSchema([]byte(`{"pattern": "` + long + `"}`)); err == nil {
		t.Error("a pattern over MaxPatternBytes compiled")
	}
	s, _, err := CompileSchema([]byte(`{"$schema": "http://json-schema.org/draft-07/schema#", "properties": {"x": {"format": "regex"}}}`))
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

// A schema that does not compile here fails the render before Helm's compiler, which
// might have fetched what it refers to before failing, runs.
func TestSchemaThatDoesNotCompileFailsFirst(t *testing.T) {
	var fetched atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fetched.Add(1) }))
	defer srv.Close()
	ch, err := loader.LoadDir(filepath.Join("..", "..", "testdata", "charts", "tiny"))
	if err != nil {
		t.Fatal(err)
	}
	ch.Schema = []byte(`{"properties": {"a": {"pattern": "(unclosed"}, "b": {"$ref": "` + srv.URL + `/s.json"}}}`)
	_, err = Render(context.Background(), RenderRequest{Namespace: "n", Name: "web", Chart: ch, Values: map[string]any{"a": "x"}})
	if err == nil || !strings.Contains(err.Error(), "values.schema.json of chart tiny") {
		t.Errorf("render with a schema that does not compile: %v", err)
	}
	if n := fetched.Load(); n != 0 {
		t.Errorf("the schema's reference was fetched %d times", n)
	}
}
