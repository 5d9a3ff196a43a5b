// Package valuesfrom is values_from, as Flux's valuesFrom: Helm values from Secrets and
// ConfigMaps of the release's namespace. Only references travel; the values are read as the
// caller where used, bounded here, and merged in order before the inline values.
package valuesfrom

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
)

// Kinds a reference may name.
const (
	KindSecret    = "Secret"
	KindConfigMap = "ConfigMap"
)

// DefaultKey is the key read when a reference names none (Flux's valuesKey default).
const DefaultKey = "values.yaml"

// Bounds of hostile input, refused before it is read (count) or parsed (bytes, and nodes with
// aliases written out: a parser holds what the nodes do, 57 MiB for 1 MiB of "{a: },").
const (
	MaxRefs       = 16
	MaxKeyBytes   = 512 << 10               // one key's YAML
	MaxTotalBytes = 1 << 20                 // every key's YAML, written out, together
	MaxTotalNodes = bounds.DefaultYAMLNodes // every key's YAML nodes together: the values' bound
)

// ErrInvalid is a reference that cannot be used (400).
var ErrInvalid = errors.New("invalid values_from")

// Ref names one key of a Secret or ConfigMap in the release's namespace.
type Ref struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Key defaults to DefaultKey.
	Key string `json:"key,omitempty"`
	// Namespace may only be the release's own (or empty): objects are read there only.
	Namespace string `json:"namespace,omitempty"`
}

// String is the reference as oc helm's --values-from writes it.
func (r Ref) String() string {
	return strings.ToLower(r.Kind) + "/" + r.Name + ":" + r.KeyOrDefault()
}

// KeyOrDefault is the key read.
func (r Ref) KeyOrDefault() string {
	if r.Key == "" {
		return DefaultKey
	}
	return r.Key
}

// Parse reads oc helm's form: secret/NAME[:key] or configmap/NAME[:key].
func Parse(s string) (Ref, error) {
	kind, rest, ok := strings.Cut(s, "/")
	var r Ref
	switch strings.ToLower(kind) {
	case "secret":
		r.Kind = KindSecret
	case "configmap", "cm":
		r.Kind = KindConfigMap
	default:
		ok = false
	}
	if !ok {
		return Ref{}, fmt.Errorf("%w: %q: want secret/NAME[:key] or configmap/NAME[:key]", ErrInvalid, s)
	}
	r.Name, r.Key, _ = strings.Cut(rest, ":")
	return r, r.Validate()
}

// Validate checks one reference without the cluster.
func (r Ref) Validate() error {
	if r.Kind != KindSecret && r.Kind != KindConfigMap {
		return fmt.Errorf("%w: kind %q: want %s or %s", ErrInvalid, r.Kind, KindSecret, KindConfigMap)
	}
	if errs := validation.IsDNS1123Subdomain(r.Name); len(errs) > 0 {
		return fmt.Errorf("%w: %s name %q: %s", ErrInvalid, r.Kind, r.Name, errs[0])
	}
	if errs := validation.IsConfigMapKey(r.KeyOrDefault()); len(errs) > 0 {
		return fmt.Errorf("%w: %s %s key %q: %s", ErrInvalid, r.Kind, r.Name, r.Key, errs[0])
	}
	return nil
}

// Validate checks the references of a release in namespace: at most MaxRefs, valid, in namespace.
func Validate(refs []Ref, namespace string) error {
	if len(refs) > MaxRefs {
		return fmt.Errorf("%w: %d references, at most %d", ErrInvalid, len(refs), MaxRefs)
	}
	for _, r := range refs {
		if r.Namespace != "" && r.Namespace != namespace {
			return fmt.Errorf("%w: %s %s/%s: a reference reads the release's namespace %s only",
				ErrInvalid, r.Kind, r.Namespace, r.Name, namespace)
		}
		if err := r.Validate(); err != nil {
			return err
		}
	}
	return nil
}
