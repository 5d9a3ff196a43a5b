package storage

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// Keep is one data entry a Secret keeps across Helm's rewrites (KeepData).
type Keep struct {
	// Secret is the name of the Secret that keeps it.
	Secret string
	// Key and Value are the data entry.
	Key   string
	Value []byte
	// While says, from the labels of a write, whether the Secret still keeps the entry.
	While func(labels map[string]string) bool
}

// KeepData wraps the Secrets client Helm's driver writes through during an action so that
// k's entry survives Helm's whole-object rewrites of k.Secret while k.While holds
// (release.KeepEvent). Without a value the client is not wrapped.
func KeepData(si typedcorev1.SecretInterface, k Keep) typedcorev1.SecretInterface {
	if len(k.Value) == 0 {
		return si
	}
	return &dataKeeper{SecretInterface: si, k: k}
}

type dataKeeper struct {
	typedcorev1.SecretInterface
	k Keep
}

func (d *dataKeeper) keep(s *corev1.Secret) {
	if s.Name != d.k.Secret || !d.k.While(s.Labels) {
		return
	}
	if s.Data == nil {
		s.Data = map[string][]byte{}
	}
	s.Data[d.k.Key] = d.k.Value
}

func (d *dataKeeper) Create(ctx context.Context, s *corev1.Secret, o metav1.CreateOptions) (*corev1.Secret, error) {
	d.keep(s)
	return d.SecretInterface.Create(ctx, s, o)
}

func (d *dataKeeper) Update(ctx context.Context, s *corev1.Secret, o metav1.UpdateOptions) (*corev1.Secret, error) {
	d.keep(s)
	return d.SecretInterface.Update(ctx, s, o)
}
