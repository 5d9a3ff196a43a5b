package release

import (
	"context"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// writeBetween is a client whose first Secret update is preceded by write, as another
// writer's lands between the read and the update.
type writeBetween struct {
	kubernetes.Interface
	write func()
}

func (w *writeBetween) CoreV1() typedcorev1.CoreV1Interface {
	return &writeBetweenCore{CoreV1Interface: w.Interface.CoreV1(), w: w}
}

type writeBetweenCore struct {
	typedcorev1.CoreV1Interface
	w *writeBetween
}

func (c *writeBetweenCore) Secrets(ns string) typedcorev1.SecretInterface {
	return &writeBetweenSecrets{SecretInterface: c.CoreV1Interface.Secrets(ns), w: c.w}
}

type writeBetweenSecrets struct {
	typedcorev1.SecretInterface
	w *writeBetween
}

func (s *writeBetweenSecrets) Update(ctx context.Context, sec *corev1.Secret, o metav1.UpdateOptions) (*corev1.Secret, error) {
	if s.w.write != nil {
		s.w.write()
		s.w.write = nil
	}
	return s.SecretInterface.Update(ctx, sec, o)
}

// An uninstall right after a deploy is not refused because the notifier's mark of the final
// status (a metadata write) landed between its read and its mark; a write that changed the
// status still is.
func TestMarkUninstallingRetriesAWriteThatKeptTheStatus(t *testing.T) {
	for _, tc := range []struct {
		name    string
		status  helmrelease.Status // what the write between leaves
		refused bool
	}{
		{"the notifier's mark", helmrelease.StatusDeployed, false},
		{"a status change", helmrelease.StatusSuperseded, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, c, _ := newStore(t)
			reserve(t, s, "web", ActionInstall, "req-1")
			finish(t, c, "web", 1, helmrelease.StatusDeployed)
			w := &writeBetween{Interface: c}
			w.write = func() {
				if tc.status != helmrelease.StatusDeployed {
					finish(t, c, "web", 1, tc.status)
					return
				}
				patch := []byte(`{"metadata":{"annotations":{"async-helm.io/notified":"x"}}}`)
				if _, err := c.CoreV1().Secrets("ns").Patch(ctx(t), SecretName("web", 1), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			s.Client = w
			marked, err := s.MarkUninstalling(ctx(t), UninstallMark{Namespace: "ns", Name: "web", Revision: 1, RequestID: "req-u"})
			if tc.refused {
				if !isErr(err, ErrConflict) {
					t.Fatalf("MarkUninstalling after %s: %v, want ErrConflict", tc.name, err)
				}
				return
			}
			if err != nil {
				t.Fatalf("MarkUninstalling after %s: %v", tc.name, err)
			}
			if marked.Release.Info.Status != helmrelease.StatusUninstalling || marked.Secret.Labels[LabelRequestID] != "req-u" {
				t.Errorf("marked %s with labels %v", marked.Release.Info.Status, marked.Secret.Labels)
			}
		})
	}
}
