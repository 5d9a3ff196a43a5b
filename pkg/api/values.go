package api

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
)

// MaxValueNodes bounds a request's values in what they decode to, as MaxBodyBytes bounds
// them in bytes (values of tiny maps decode to ~40 times their bytes): the values' bound
// where Helm copies them (source.ChargeValues), counted before they are decoded.
const MaxValueNodes = bounds.DefaultYAMLNodes

// ErrTooManyValues is a request whose values pass MaxValueNodes (413, as a large body).
var ErrTooManyValues = errors.New("request values too large")

// Values are a request's values, their JSON values counted (yamlsize.JSONNodes) before any decode.
type Values map[string]any

// UnmarshalJSON decodes values of at most MaxValueNodes JSON values.
func (v *Values) UnmarshalJSON(raw []byte) error {
	if n := yamlsize.JSONNodes(raw, MaxValueNodes); n > MaxValueNodes {
		return fmt.Errorf("%w: more than %d JSON values", ErrTooManyValues, MaxValueNodes)
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	*v = m
	return nil
}
