package release

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// capturingSecrets gives Helm's Secrets driver (which uses context.Background) the
// caller's context, and keeps the object the API server returned from Create.
type capturingSecrets struct {
	typedcorev1.SecretInterface
	ctx     context.Context
	created *corev1.Secret
	// addLabels and addData go into the created secret beside Helm's (the reservation's
	// queued label and stored event).
	addLabels map[string]string
	addData   map[string][]byte
	// conditional makes Update carry the resourceVersion of the last Get: Helm's driver
	// writes whole objects without one, which would overwrite a concurrent write.
	conditional bool
	read        string
	// readObj and updated are the secret as last read and as last written (an uninstall
	// mark keeps both, to put the secret back when nobody will act on it).
	readObj, updated *corev1.Secret
}

// decorate adds this write's labels and data to what Helm's driver built.
func (c *capturingSecrets) decorate(s *corev1.Secret) {
	for k, v := range c.addLabels {
		s.Labels[k] = v
	}
	for k, v := range c.addData {
		s.Data[k] = v
	}
}

func (c *capturingSecrets) Create(_ context.Context, s *corev1.Secret, o metav1.CreateOptions) (*corev1.Secret, error) {
	c.decorate(s)
	out, err := c.SecretInterface.Create(c.ctx, s, o)
	c.created = out
	return out, err
}

func (c *capturingSecrets) Get(_ context.Context, name string, o metav1.GetOptions) (*corev1.Secret, error) {
	out, err := c.SecretInterface.Get(c.ctx, name, o)
	if err == nil {
		c.read = out.ResourceVersion
		c.readObj = out.DeepCopy()
	}
	return out, err
}

func (c *capturingSecrets) Update(_ context.Context, s *corev1.Secret, o metav1.UpdateOptions) (*corev1.Secret, error) {
	if c.conditional {
		s.ResourceVersion = c.read
	}
	c.decorate(s)
	out, err := c.SecretInterface.Update(c.ctx, s, o)
	c.updated = out
	return out, err
}

func (c *capturingSecrets) List(_ context.Context, o metav1.ListOptions) (*corev1.SecretList, error) {
	return c.SecretInterface.List(c.ctx, o)
}
