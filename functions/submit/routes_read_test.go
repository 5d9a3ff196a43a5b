package main

import (
	"encoding/json"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// A read's answer is written a row at a time, each row dropped once written, and reads as
// the whole value's JSON; a tenant's '<' and '&' are not escaped to six bytes each.
func TestAReadsAnswerIsWrittenARowAtATime(t *testing.T) {
	for _, tc := range []struct {
		name string
		v    any
	}{
		{"rows", []map[string]string{{"manifest": "<a>&"}, {"b": "c"}}},
		{"no rows", []map[string]string{}},
		{"nil", []map[string]string(nil)},
		{"one value", map[string]string{"manifest": "<a>"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want, _ := json.Marshal(tc.v)
			rec := httptest.NewRecorder()
			writeAnswer(rec, tc.v)
			var got, wantV any
			if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil {
				t.Fatalf("answer %q: %v", rec.Body.String(), err)
			}
			_ = json.Unmarshal(want, &wantV)
			if !reflect.DeepEqual(got, wantV) || strings.Contains(rec.Body.String(), `\u003c`) {
				t.Errorf("answer %q, want %s", rec.Body.String(), want)
			}
			if rows, ok := tc.v.([]map[string]string); ok {
				for i, r := range rows {
					if r != nil {
						t.Errorf("row %d kept after it was written", i)
					}
				}
			}
		})
	}
}
