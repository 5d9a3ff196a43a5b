package helmexec

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"helm.sh/helm/v3/pkg/chart"
)

// SchemaURL is the name Helm compiles a chart's schema under; its validation errors start
// with it.
const SchemaURL = "file:///values.schema.json"

// MaxPatternBytes bounds a regular expression a schema compiles ("pattern",
// "patternProperties") or a value checked as "format": "regex": Go compiles one in time and
// memory linear in its length but large (a 5 MB pattern took 10.9 s and 615 MiB).
const MaxPatternBytes = 16 << 10

// CompileSchema compiles a chart's values.schema.json as Helm's validation does, but fetches
// nothing and bounds its patterns. A reference to another document (a file or a URL, which
// Helm's own loaders read from wherever they run: the executor's files, the cluster's
// network) is not followed: ref names it, and the schema is nil. URNs get Helm's
// permissive schema.
func CompileSchema(raw []byte) (s *jsonschema.Schema, ref string, err error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, "", err
	}
	c := jsonschema.NewCompiler()
	loader := &refusingLoader{}
	c.UseLoader(loader)
	c.UseRegexpEngine(boundedRegexp)
	if err := c.AddResource(SchemaURL, doc); err != nil {
		return nil, "", err
	}
	s, err = c.Compile(SchemaURL)
	if err != nil && loader.refused != "" {
		return nil, loader.refused, nil
	}
	return s, "", err
}

// refusingLoader loads nothing but URNs, and remembers the first document it refused.
type refusingLoader struct{ refused string }

func (l *refusingLoader) Load(url string) (any, error) {
	if strings.HasPrefix(url, "urn:") {
		return jsonschema.UnmarshalJSON(strings.NewReader("true"))
	}
	if l.refused == "" {
		l.refused = url
	}
	return nil, errors.New("the schema refers to another document: " + url)
}

func boundedRegexp(s string) (jsonschema.Regexp, error) {
	if len(s) > MaxPatternBytes {
		return nil, fmt.Errorf("a regular expression of %d bytes, over %d", len(s), MaxPatternBytes)
	}
	return regexp.Compile(s)
}

// skipSchemaValidation tells whether Helm's schema validation must be off for the chart:
// a schema of the chart or its subcharts refers to another document, which Helm would
// fetch; such a chart runs unchecked, as submit does not check it either
// (docs/security.md). A schema that does not compile here is an error before Helm runs:
// Helm's compiler, which differs only in its loaders, might have fetched before failing.
func skipSchemaValidation(ch *chart.Chart) (bool, error) {
	if ch == nil {
		return false, nil
	}
	if len(ch.Schema) > 0 {
		_, ref, err := CompileSchema(ch.Schema)
		if err != nil {
			return false, fmt.Errorf("values.schema.json of chart %s: %w", ch.Name(), err)
		}
		if ref != "" {
			return true, nil
		}
	}
	for _, d := range ch.Dependencies() {
		if skip, err := skipSchemaValidation(d); skip || err != nil {
			return skip, err
		}
	}
	return false, nil
}
