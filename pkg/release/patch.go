package release

import (
	"context"
	"encoding/json"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// AnnotationFailure is why async-helm failed a revision whose record does not decode
// (MarkUndecodable): the record cannot carry the reason itself.
const AnnotationFailure = "async-helm.io/failure"

// secretPatch is a JSON merge patch of a release Secret's metadata: the one way async-helm
// changes labels and annotations of a record without rewriting it. A nil value deletes.
type secretPatch struct {
	// ResourceVersion, when set, makes the patch a compare-and-swap.
	ResourceVersion string
	Labels          map[string]*string
	Annotations     map[string]*string
}

func (p secretPatch) MarshalJSON() ([]byte, error) {
	meta := map[string]any{}
	if p.ResourceVersion != "" {
		meta["resourceVersion"] = p.ResourceVersion
	}
	if len(p.Labels) > 0 {
		meta["labels"] = p.Labels
	}
	if len(p.Annotations) > 0 {
		meta["annotations"] = p.Annotations
	}
	return json.Marshal(map[string]any{"metadata": meta})
}

func ptr(s string) *string { return &s }

// patchSecret applies p to a release Secret, through the metadata client when the Store has
// one (the answer is its metadata, not the record). False, without error, when the Secret
// changed since p.ResourceVersion or is gone: the caller's next look sees the newer one.
func (s *Store) patchSecret(ctx context.Context, namespace, name string, p secretPatch, what string) (bool, error) {
	data, err := json.Marshal(p)
	if err != nil {
		return false, fmt.Errorf("%s %s/%s: %w", what, namespace, name, err)
	}
	if s.Metadata != nil {
		_, err = s.Metadata.Resource(SecretsResource).Namespace(namespace).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
	} else {
		_, err = s.Client.CoreV1().Secrets(namespace).Patch(ctx, name, types.MergePatchType, data, metav1.PatchOptions{})
	}
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("%s %s/%s: %w", what, namespace, name, err)
	}
	return true, nil
}
