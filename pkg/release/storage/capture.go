package storage

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// CapturingSecrets gives Helm's Secrets driver (which uses context.Background) the
// caller's context, and keeps the object the API server returned from Create.
type CapturingSecrets struct {
	typedcorev1.SecretInterface
	Ctx context.Context
	// Created is the secret as Create returned it.
	Created *corev1.Secret
	// AddLabels and AddData go into the created secret beside Helm's (the reservation's
	// queued label and stored event).
	AddLabels map[string]string
	AddData   map[string][]byte
	// Conditional makes Update carry the resourceVersion of the last Get: Helm's driver
	// writes whole objects without one, which would overwrite a concurrent write.
	Conditional bool
	// Carry are data entries an Update keeps from the Secret as last read (Helm's driver
	// writes only its own).
	Carry []string
	read  string
	// ReadObj and Updated are the secret as last read and as last written (an uninstall
	// mark keeps both, to put the secret back when nobody will act on it).
	ReadObj, Updated *corev1.Secret
}

// decorate adds this write's labels and data to what Helm's driver built.
func (c *CapturingSecrets) decorate(s *corev1.Secret) {
	for k, v := range c.AddLabels {
		s.Labels[k] = v
	}
	for k, v := range c.AddData {
		s.Data[k] = v
	}
}

// carry copies the Carry entries of the Secret as last read into s, if it is the same one.
func (c *CapturingSecrets) carry(s *corev1.Secret) {
	if c.ReadObj == nil || c.ReadObj.Name != s.Name {
		return
	}
	for _, k := range c.Carry {
		if v, ok := c.ReadObj.Data[k]; ok {
			if s.Data == nil {
				s.Data = map[string][]byte{}
			}
			s.Data[k] = v
		}
	}
}

func (c *CapturingSecrets) Create(_ context.Context, s *corev1.Secret, o metav1.CreateOptions) (*corev1.Secret, error) {
	c.decorate(s)
	out, err := c.SecretInterface.Create(c.Ctx, s, o)
	c.Created = out
	return out, err
}

func (c *CapturingSecrets) Get(_ context.Context, name string, o metav1.GetOptions) (*corev1.Secret, error) {
	out, err := c.SecretInterface.Get(c.Ctx, name, o)
	if err == nil {
		c.read = out.ResourceVersion
		c.ReadObj = out.DeepCopy()
	}
	return out, err
}

func (c *CapturingSecrets) Update(_ context.Context, s *corev1.Secret, o metav1.UpdateOptions) (*corev1.Secret, error) {
	if c.Conditional {
		s.ResourceVersion = c.read
	}
	c.carry(s)
	c.decorate(s)
	out, err := c.SecretInterface.Update(c.Ctx, s, o)
	c.Updated = out
	return out, err
}

func (c *CapturingSecrets) List(_ context.Context, o metav1.ListOptions) (*corev1.SecretList, error) {
	return c.SecretInterface.List(c.Ctx, o)
}
