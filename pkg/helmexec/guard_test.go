package helmexec

import (
	"context"
	"io"
	"testing"

	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/release"
)

// garbageSecrets serves one release record whose payload does not decode, as a tenant
// may write it.
type garbageSecrets struct{ typedcorev1.SecretInterface }

func garbage() *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: release.SecretName("web", 1), Namespace: "ns",
		Labels: map[string]string{"owner": "helm", "name": "web", "status": "pending-install", "version": "1"}},
		Type: "helm.sh/release.v1", Data: map[string][]byte{"release": []byte("garbage")}}
}

func (garbageSecrets) Get(context.Context, string, metav1.GetOptions) (*corev1.Secret, error) {
	return garbage(), nil
}

func (garbageSecrets) List(context.Context, metav1.ListOptions) (*corev1.SecretList, error) {
	return &corev1.SecretList{Items: []corev1.Secret{*garbage()}}, nil
}

// Helm's driver.Secrets.Get dereferences nil on a record that does not decode; the
// configuration's driver answers an error instead.
func TestUndecodableRecordIsAnErrorNotAPanic(t *testing.T) {
	f, err := NewFactory(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Configuration("ns", WithKubeClient(&kubefake.PrintingKubeClient{Out: io.Discard}),
		WithSecretsClient(func(typedcorev1.SecretInterface) typedcorev1.SecretInterface { return garbageSecrets{} }))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if p := recover(); p != nil {
			t.Fatalf("reading the record panicked: %v", p)
		}
	}()
	if _, err := cfg.Releases.Get("web", 1); err == nil {
		t.Error("an undecodable record was read without error")
	}
	if h, err := cfg.Releases.History("web"); err == nil && len(h) != 0 {
		t.Errorf("history holds the undecodable record: %v", h)
	}
}
