package valuesfrom

import (
	"context"
	"errors"
	"fmt"
	"maps"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/async-helm/async-helm/pkg/chart/yamlsize"
)

// ErrForbidden is a reference the caller may not get (403): nothing is read for them.
var ErrForbidden = errors.New("the caller may not read a values_from object")

// Reader reads one object's data as the caller; a missing object is (nil, false, nil).
type Reader interface {
	Data(ctx context.Context, kind, namespace, name string) (data map[string][]byte, found bool, err error)
}

// Load reads refs with r and merges them in order (deeply, a later one winning), within bounds.
func Load(ctx context.Context, r Reader, namespace string, refs []Ref) (map[string]any, error) {
	if err := Validate(refs, namespace); err != nil {
		return nil, err
	}
	out := map[string]any{}
	var total yamlsize.Size
	for _, ref := range refs {
		data, found, err := r.Data(ctx, ref.Kind, namespace, ref.Name)
		if err != nil {
			return nil, fmt.Errorf("values_from %s %s/%s: %w", ref.Kind, namespace, ref.Name, err)
		}
		if !found {
			return nil, fmt.Errorf("%w: %s %s/%s not found", ErrInvalid, ref.Kind, namespace, ref.Name)
		}
		vals, n, err := decode(ref, namespace, data, yamlsize.Size{Bytes: MaxTotalBytes - total.Bytes, Nodes: MaxTotalNodes - total.Nodes})
		if err != nil {
			return nil, err
		}
		total.Bytes, total.Nodes = total.Bytes+n.Bytes, total.Nodes+n.Nodes
		Merge(out, vals)
	}
	return out, nil
}

// decode parses ref's key of data as a YAML map, within budget written out.
func decode(ref Ref, namespace string, data map[string][]byte, budget yamlsize.Size) (map[string]any, yamlsize.Size, error) {
	key := ref.KeyOrDefault()
	raw, ok := data[key]
	if !ok {
		return nil, yamlsize.Size{}, fmt.Errorf("%w: %s %s/%s has no key %q", ErrInvalid, ref.Kind, namespace, ref.Name, key)
	}
	where := fmt.Sprintf("%s %s/%s key %q", ref.Kind, namespace, ref.Name, key)
	if len(raw) > MaxKeyBytes {
		return nil, yamlsize.Size{}, fmt.Errorf("%w: %s: %d bytes, at most %d", ErrInvalid, where, len(raw), MaxKeyBytes)
	}
	size, err := yamlsize.Expanded(raw, min(budget.Bytes, MaxKeyBytes))
	if err == nil && size.Nodes > budget.Nodes {
		err = fmt.Errorf("%w: up to %d YAML nodes", yamlsize.ErrTooLarge, size.Nodes)
	}
	if err != nil {
		return nil, yamlsize.Size{}, fmt.Errorf("%w: %s (values_from reads at most %d bytes and %d YAML nodes in all): %v", ErrInvalid, where, MaxTotalBytes, MaxTotalNodes, err)
	}
	var vals map[string]any
	if err := yaml.Unmarshal(raw, &vals); err != nil {
		return nil, yamlsize.Size{}, fmt.Errorf("%w: %s is not a YAML map of values: %v", ErrInvalid, where, err)
	}
	if vals == nil {
		vals = map[string]any{}
	}
	return vals, size, nil
}

// Merge merges src into dst deeply, src winning (as Flux); maps of src are copied, not shared.
func Merge(dst, src map[string]any) map[string]any {
	for k, v := range src {
		sm, ok := v.(map[string]any)
		if !ok {
			dst[k] = v
			continue
		}
		dm, ok := dst[k].(map[string]any)
		if !ok {
			dm = map[string]any{}
		}
		dst[k] = Merge(dm, sm)
	}
	return dst
}

// KubeReader reads with a client (impersonating the caller, or after an access review).
type KubeReader struct {
	Client kubernetes.Interface
}

// Data implements Reader.
func (k KubeReader) Data(ctx context.Context, kind, namespace, name string) (map[string][]byte, bool, error) {
	var data map[string][]byte
	var err error
	switch kind {
	case KindSecret:
		sec, gerr := k.Client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		if err = gerr; err == nil {
			data = sec.Data
		}
	case KindConfigMap:
		cm, gerr := k.Client.CoreV1().ConfigMaps(namespace).Get(ctx, name, metav1.GetOptions{})
		if err = gerr; err == nil {
			data = configMapData(cm.Data, cm.BinaryData)
		}
	default:
		return nil, false, fmt.Errorf("%w: kind %q", ErrInvalid, kind)
	}
	switch {
	case apierrors.IsNotFound(err):
		return nil, false, nil
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return nil, false, fmt.Errorf("%w: %w", ErrForbidden, err)
	case err != nil:
		return nil, false, fmt.Errorf("read %s %s/%s: %w", kind, namespace, name, err)
	}
	return data, true, nil
}

func configMapData(text map[string]string, binary map[string][]byte) map[string][]byte {
	out := make(map[string][]byte, len(text)+len(binary))
	maps.Copy(out, binary)
	for k, v := range text {
		out[k] = []byte(v)
	}
	return out
}

// Values are the values of a request: refs read with r and merged in order, then inline.
func Values(ctx context.Context, r Reader, namespace string, refs []Ref, inline map[string]any) (map[string]any, error) {
	if len(refs) == 0 {
		return inline, nil
	}
	out, err := Load(ctx, r, namespace, refs)
	if err != nil {
		return nil, err
	}
	return Merge(out, inline), nil
}
