package release

import (
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/async-helm/async-helm/pkg/release/storage"
)

// KeepEvent wraps the Secrets client Helm's driver writes through during an action so the
// revision's stored event survives Helm's rewrites while the revision is pending: if the
// executor dies after adoption, the notifier can still drive the work to another one.
// Helm's final write (deployed, failed) carries no event.
func KeepEvent(si typedcorev1.SecretInterface, secretName string, event []byte) typedcorev1.SecretInterface {
	return storage.KeepData(si, storage.Keep{Secret: secretName, Key: DataEvent, Value: event,
		While: func(labels map[string]string) bool { return IsPending(labels[LabelStatus]) }})
}
