package release

import (
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/async-helm/async-helm/pkg/release/storage"
)

// KeepEvent keeps the revision's stored event through Helm's rewrites while it is pending
// (storage.KeepData): an executor that dies after adoption leaves the work to another.
// Helm's final write (deployed, failed) carries no event.
func KeepEvent(si typedcorev1.SecretInterface, secretName string, event []byte) typedcorev1.SecretInterface {
	return storage.KeepData(si, storage.Keep{Secret: secretName, Key: DataEvent, Value: event,
		While: func(labels map[string]string) bool { return IsPending(labels[LabelStatus]) }})
}
