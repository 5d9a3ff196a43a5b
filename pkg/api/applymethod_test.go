package api

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestServerSideTakesBooleansAndAuto(t *testing.T) {
	cases := map[string]ServerSide{
		`{}`: ServerSideDefault, `{"server_side":null}`: ServerSideDefault,
		`{"server_side":true}`: ServerSideTrue, `{"server_side":false}`: ServerSideFalse,
		`{"server_side":"true"}`: ServerSideTrue, `{"server_side":"false"}`: ServerSideFalse,
		`{"server_side":"auto"}`: ServerSideAuto,
	}
	for in, want := range cases {
		var r ReleaseRequest
		if err := json.Unmarshal([]byte(in), &r); err != nil || r.ServerSide != want {
			t.Errorf("%s: %q, %v; want %q", in, r.ServerSide, err, want)
		}
	}
	for _, in := range []string{`{"server_side":"yes"}`, `{"server_side":1}`, `{"server_side":["auto"]}`} {
		var r ReleaseRequest
		if err := json.Unmarshal([]byte(in), &r); !errors.Is(err, ErrServerSide) {
			t.Errorf("%s: %v, want ErrServerSide", in, err)
		}
	}
}
