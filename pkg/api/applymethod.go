package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
)

// ServerSide is a request's apply method under the Helm v4 engine (docs/api.md): JSON true,
// false or "auto" (or "true", "false"); absent is client-side, as the console (and v3) apply.
type ServerSide string

// The apply methods a request may ask for.
const (
	ServerSideDefault ServerSide = ""
	ServerSideTrue    ServerSide = "true"
	ServerSideFalse   ServerSide = "false"
	// ServerSideAuto applies as the release being replaced was applied (Flux's "auto").
	ServerSideAuto ServerSide = "auto"
)

// ErrServerSide is a server_side value that is none of true, false and "auto".
var ErrServerSide = errors.New(`server_side: want true, false or "auto"`)

// UnmarshalJSON takes a boolean or one of the strings.
func (s *ServerSide) UnmarshalJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	switch v := v.(type) {
	case nil:
		*s = ServerSideDefault
	case bool:
		*s = ServerSide(strconv.FormatBool(v))
	case string:
		switch ServerSide(v) {
		case ServerSideTrue, ServerSideFalse, ServerSideAuto, ServerSideDefault:
			*s = ServerSide(v)
		default:
			return fmt.Errorf("%w, not %q", ErrServerSide, v)
		}
	default:
		return fmt.Errorf("%w, not %s", ErrServerSide, b)
	}
	return nil
}
