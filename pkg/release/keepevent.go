package release

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// KeepEvent wraps the Secrets client Helm's driver writes through during an action so the
// revision's stored event survives Helm's rewrites while the revision is pending: if the
// executor dies after adoption, the notifier can still drive the work to another one.
// Helm's final write (deployed, failed) carries no event.
func KeepEvent(si typedcorev1.SecretInterface, secretName string, event []byte) typedcorev1.SecretInterface {
	if len(event) == 0 {
		return si
	}
	return &eventKeeper{SecretInterface: si, name: secretName, event: event}
}

type eventKeeper struct {
	typedcorev1.SecretInterface
	name  string
	event []byte
}

func (k *eventKeeper) keep(s *corev1.Secret) {
	if s.Name != k.name || !IsPending(s.Labels[LabelStatus]) {
		return
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[DataEvent] = k.event
}

func (k *eventKeeper) Create(ctx context.Context, s *corev1.Secret, o metav1.CreateOptions) (*corev1.Secret, error) {
	k.keep(s)
	return k.SecretInterface.Create(ctx, s, o)
}

func (k *eventKeeper) Update(ctx context.Context, s *corev1.Secret, o metav1.UpdateOptions) (*corev1.Secret, error) {
	k.keep(s)
	return k.SecretInterface.Update(ctx, s, o)
}
