package release

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// V4Fields are the fields of a Helm v4 record that v3's release type has not, kept when
// async-helm rewrites it through v3's types (MarkFailed): v4's `auto` apply reads apply_method.
type V4Fields struct {
	ApplyMethod string `json:"apply_method,omitempty"`
	Info        struct {
		RollbackRevision int `json:"rollback_revision,omitempty"`
	} `json:"info"`
}

// Empty reports a record with none of them.
func (f V4Fields) Empty() bool { return f.ApplyMethod == "" && f.Info.RollbackRevision == 0 }

// keepingV4Fields writes into each payload it updates the v4 fields of the payload it last
// read (of the same Secret).
type keepingV4Fields struct {
	typedcorev1.SecretInterface
	read   string
	fields V4Fields
}

func (k *keepingV4Fields) Get(ctx context.Context, name string, o metav1.GetOptions) (*corev1.Secret, error) {
	sec, err := k.SecretInterface.Get(ctx, name, o)
	k.read, k.fields = name, V4Fields{}
	if err == nil && sec.Data["release"] != nil {
		// Through the guarded decode; a payload that does not decode has none to keep.
		_ = decodeInto(sec.Data["release"], &k.fields, MaxRecordBytes, sec.Namespace)
	}
	return sec, err
}

func (k *keepingV4Fields) Update(ctx context.Context, sec *corev1.Secret, o metav1.UpdateOptions) (*corev1.Secret, error) {
	if sec.Name == k.read && !k.fields.Empty() && sec.Data["release"] != nil {
		data, err := WithV4Fields(sec.Data["release"], k.fields)
		if err != nil {
			return nil, fmt.Errorf("keep the helm v4 fields of %s: %w", sec.Name, err)
		}
		sec.Data["release"] = data
	}
	return k.SecretInterface.Update(ctx, sec, o)
}

// WithV4Fields is payload (one Helm v3's driver just encoded) with f written as Helm v4's
// driver writes them.
func WithV4Fields(payload []byte, f V4Fields) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := decodeInto(payload, &doc, MaxRecordBytes, ""); err != nil {
		return nil, err
	}
	if f.ApplyMethod != "" {
		doc["apply_method"], _ = json.Marshal(f.ApplyMethod)
	}
	if f.Info.RollbackRevision != 0 && doc["info"] != nil {
		var info map[string]json.RawMessage
		if err := json.Unmarshal(doc["info"], &info); err != nil {
			return nil, err
		}
		info["rollback_revision"], _ = json.Marshal(f.Info.RollbackRevision)
		raw, err := json.Marshal(info)
		if err != nil {
			return nil, err
		}
		doc["info"] = raw
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return encodePayload(b)
}
