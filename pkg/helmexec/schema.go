package helmexec

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"helm.sh/helm/v3/pkg/chart"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
)

// SchemaURL is the name Helm compiles a chart's schema under; its validation errors start
// with it.
const SchemaURL = "file:///values.schema.json"

// MaxPatternBytes bounds a regular expression a schema compiles ("pattern",
// "patternProperties") or a value checked as "format": "regex": Go compiles one in time and
// memory linear in its length but large (a 5 MB pattern took 10.9 s and 615 MiB).
const MaxPatternBytes = bounds.MaxSchemaString

// compileSchema compiles a chart's values.schema.json as Helm's validation does, but
// fetches nothing and bounds its patterns. A schema that could make a compiler fetch
// (ScanSchema) is not compiled: scan.fetches names why, and the schema is nil. URNs get
// Helm's permissive schema.
func compileSchema(raw []byte) (*jsonschema.Schema, schemaScan, error) {
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return nil, schemaScan{}, err
	}
	scan, err := scanSchema(doc)
	if err != nil || scan.fetches != "" {
		return nil, scan, err
	}
	c := jsonschema.NewCompiler()
	loader := &refusingLoader{}
	c.UseLoader(loader)
	c.UseRegexpEngine(boundedRegexp)
	if err := c.AddResource(SchemaURL, doc); err != nil {
		return nil, scan, err
	}
	s, err := c.Compile(SchemaURL)
	if err != nil && loader.refused != "" {
		scan.fetches = loader.refused
		return nil, scan, nil
	}
	return s, scan, err
}

// schemaScan is what a schema's text says before anything compiles it.
type schemaScan struct {
	// fetches names a reference a compiler would fetch (another document, a $schema that
	// is not a draft jsonschema knows); "" when every one resolves inside the schema.
	fetches string
	// regexValues is set by "format": "regex": values are compiled as regular expressions,
	// which Helm's compiler does without a bound.
	regexValues bool
	// refs is set by any reference, even inside the schema.
	refs bool
	// objects counts the schema's objects: its subschemas, an upper bound of the checks
	// each value node may meet.
	objects int
}

// scanSchema reads every "$ref", "$dynamicRef", "$recursiveRef", "$schema" and "format"
// of a decoded schema, at any depth (a property named so counts too: a false alarm only
// turns Helm's check off), and every number. Whether a compile calls its loader is not
// enough to know whether Helm's will: jsonschema v6 compiles subschemas in map order, so a
// "$ref" an "$id" elsewhere satisfies may or may not be loaded, run to run.
// A fragment that names a node twice ("#/allOf/00" beside "#/allOf/0") and a number beyond
// float64 ("1e1000000": a 415 KB numerator) are errors: only an attack writes them.
func scanSchema(v any) (schemaScan, error) {
	var scan schemaScan
	err := scan.walk(v)
	return scan, err
}

func (s *schemaScan) walk(v any) error {
	switch v := v.(type) {
	case map[string]any:
		s.objects++
		for k, e := range v {
			if err := s.keyword(k, e); err != nil {
				return err
			}
			if err := s.walk(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range v {
			if err := s.walk(e); err != nil {
				return err
			}
		}
	case json.Number:
		return checkNumber(string(v))
	}
	return nil
}

func (s *schemaScan) keyword(k string, v any) error {
	str, ok := v.(string)
	if !ok {
		return nil
	}
	switch k {
	case "$ref", "$dynamicRef", "$recursiveRef":
		s.refs = true
		if !strings.HasPrefix(str, "#") {
			s.fetches = cmp.Or(s.fetches, str)
			return nil
		}
		return checkFragment(str)
	case "$schema":
		if !knownDrafts[strings.TrimSuffix(str, "#")] {
			s.fetches = cmp.Or(s.fetches, str)
		}
	case "format":
		s.regexValues = s.regexValues || str == "regex"
	}
	return nil
}

// knownDrafts are the metaschemas jsonschema v6 knows without loading them.
var knownDrafts = map[string]bool{
	"http://json-schema.org/draft-04/schema": true, "http://json-schema.org/draft-06/schema": true,
	"http://json-schema.org/draft-07/schema": true, "https://json-schema.org/draft/2019-09/schema": true,
	"https://json-schema.org/draft/2020-12/schema": true,
}

// checkFragment refuses a JSON pointer that could name a node under a second spelling:
// an array index with a sign or a leading zero, an escape ("~", "%"). Each spelling is
// compiled again with all it holds.
func checkFragment(ref string) error {
	for _, tok := range strings.Split(strings.TrimPrefix(ref, "#"), "/") {
		if strings.ContainsAny(tok, "~%+") {
			return fmt.Errorf("a $ref %q with an escaped or signed token", ref)
		}
		digits := strings.TrimPrefix(tok, "-")
		if digits != "" && strings.Trim(digits, "0123456789") == "" && (tok != digits || (len(tok) > 1 && tok[0] == '0')) {
			return fmt.Errorf("a $ref %q with an array index spelled %q", ref, tok)
		}
	}
	return nil
}

// checkNumber refuses a number a float64 cannot hold: jsonschema parses it into a big.Rat
// as long as its exponent says.
func checkNumber(n string) error {
	mantissa, exp, _ := strings.Cut(strings.ToLower(n), "e")
	if len(mantissa) > 64 {
		return fmt.Errorf("a number of %d digits", len(mantissa))
	}
	if exp != "" {
		if e, err := strconv.Atoi(exp); err != nil || e > 400 || e < -400 {
			return fmt.Errorf("a number with the exponent %s", exp)
		}
	}
	return nil
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
// a schema of the chart or its subcharts could make Helm's compiler fetch (the executor's
// files, the cluster's network, unbounded) or compile values as regular expressions
// without a bound (docs/security.md). A schema written to blow a compile up is an error.
// The scan never compiles; JSON that does not decode fails in Helm before that.
func skipSchemaValidation(ch *chart.Chart) (bool, error) {
	if ch == nil {
		return false, nil
	}
	if len(ch.Schema) > 0 {
		if doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(ch.Schema)); err == nil {
			scan, err := scanSchema(doc)
			if err != nil {
				return false, fmt.Errorf("values.schema.json of chart %s: %w", ch.Name(), err)
			}
			if scan.fetches != "" || scan.regexValues {
				return true, nil
			}
		}
	}
	for _, d := range ch.Dependencies() {
		if skip, err := skipSchemaValidation(d); skip || err != nil {
			return skip, err
		}
	}
	return false, nil
}
