// Package hostile does to release records what a namespace editor can, for the tests of
// what async-helm must refuse (docs/security.md).
package hostile

import (
	"context"
	"fmt"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/async-helm/async-helm/pkg/release"
)

// Rewind rewrites the release Secret name in place (same UID, same creationTimestamp) to
// status, in its payload and its label, and when stored is not nil puts that event back
// as its stored request.
func Rewind(ctx context.Context, secrets typedcorev1.SecretInterface, name string, status helmrelease.Status, stored []byte) error {
	sec, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("rewind %s: %w", name, err)
	}
	rel, err := release.DecodeRelease(sec.Data["release"])
	if err != nil {
		return fmt.Errorf("rewind %s: %w", name, err)
	}
	rel.Info.Status = status
	if sec.Data["release"], err = release.EncodeRelease(rel); err != nil {
		return fmt.Errorf("rewind %s: %w", name, err)
	}
	if stored != nil {
		sec.Data[release.DataEvent] = stored
	}
	sec.Labels[release.LabelStatus] = status.String()
	if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("rewind %s: %w", name, err)
	}
	return nil
}
