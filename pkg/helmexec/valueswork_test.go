package helmexec

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// allOfItems is a schema without references whose n subschemas all apply to each item of
// the list "a": a check costs n times the items.
func allOfItems(n int) string {
	return `{"type":"object","properties":{"a":{"type":"array","items":{"allOf":[` +
		strings.TrimSuffix(strings.Repeat(`{"minimum":0},`, n), ",") + `]}}}}`
}

func zeros(n int) map[string]any {
	list := make([]any, n)
	for i := range list {
		list[i] = 0
	}
	return map[string]any{"a": list}
}

func TestAChecksWorkDecidesWhereItRuns(t *testing.T) {
	for _, c := range []struct {
		name     string
		schema   string
		values   map[string]any
		isolated bool
	}{
		{"small schema, small values", allOfItems(10), zeros(100), false},
		{"small schema, a long list", allOfItems(10), zeros(200_000), true},
		{"large schema, few values", allOfItems(6500), zeros(10), false},
		{"large schema, a list of 2,000", allOfItems(6500), zeros(2000), true},
		{"a reference", `{"$defs":{"n":{"minimum":0}},"properties":{"a":{"$ref":"#/$defs/n"}}}`, zeros(1), true},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := CompileValuesSchema([]byte(c.schema))
			if err != nil {
				t.Fatal(err)
			}
			if got := s.isolated(c.values); got != c.isolated {
				t.Fatalf("isolated %v, want %v (%d schema objects)", got, c.isolated, s.objects)
			}
		})
	}
}

// A schema without references whose subschemas all apply to each of a long list's items
// (6,500 x 2,000: minutes in process) is checked in a child, killed at its caller's
// deadline, not in the caller's process until it ends.
func TestALargeChecksWorkEndsWithItsDeadline(t *testing.T) {
	schema := allOfItems(6500)
	compiled, err := CompileValuesSchema([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	r := &Renderer{Limits: DefaultValuesLimits}
	err = r.CheckValues(ctx, []SchemaCheck{{Chart: "c", Schema: []byte(schema), Values: zeros(2000), Compiled: compiled}})
	if !errors.Is(err, ErrValuesUnchecked) {
		t.Fatalf("err %v, want %v (the child stopped at the deadline)", err, ErrValuesUnchecked)
	}
}
