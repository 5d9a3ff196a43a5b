package helmexec

import (
	"context"
	"io"
	"testing"

	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
)

type ctxKey struct{}

// recordingSecrets stands in for the API: it records the context of each read.
type recordingSecrets struct {
	typedcorev1.SecretInterface
	ctxs []context.Context
}

func (r *recordingSecrets) Get(ctx context.Context, name string, _ metav1.GetOptions) (*corev1.Secret, error) {
	r.ctxs = append(r.ctxs, ctx)
	return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "secrets"}, name)
}

func (r *recordingSecrets) List(ctx context.Context, _ metav1.ListOptions) (*corev1.SecretList, error) {
	r.ctxs = append(r.ctxs, ctx)
	return &corev1.SecretList{}, nil
}

// The Secrets client wrappers sit under Helm's driver, and reads carry the caller's
// context (Helm's driver itself passes context.Background).
func TestSecretsClientAndReadContext(t *testing.T) {
	f, err := NewFactory(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingSecrets{}
	ctx := context.WithValue(context.Background(), ctxKey{}, "caller")
	opts := []Option{WithKubeClient(&kubefake.PrintingKubeClient{Out: io.Discard}),
		WithSecretsClient(func(typedcorev1.SecretInterface) typedcorev1.SecretInterface { return rec })}
	if rels, err := f.List(ctx, "ns", opts...); err != nil || len(rels) != 0 {
		t.Errorf("List = %v, %v", rels, err)
	}
	if _, err := f.History(ctx, "ns", "web", opts...); err == nil {
		t.Error("History of nothing")
	}
	if len(rec.ctxs) != 2 {
		t.Fatalf("the wrapped Secrets client answered %d reads, want 2", len(rec.ctxs))
	}
	// Under every wrapper, the reads go out with the caller's context.
	inner := &recordingSecrets{}
	cs := ctxSecrets{SecretInterface: inner, ctx: ctx}
	_, _ = cs.Get(context.Background(), "x", metav1.GetOptions{})
	_, _ = cs.List(context.Background(), metav1.ListOptions{})
	for i, c := range inner.ctxs {
		if c.Value(ctxKey{}) != "caller" {
			t.Errorf("read %d ran with another context than the caller's", i)
		}
	}
}

func TestImpersonation(t *testing.T) {
	f, err := NewFactory(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Configuration("ns", WithImpersonation("alice", "u1", []string{"dev"}, map[string][]string{"scope": {"x"}}))
	if err != nil {
		t.Fatal(err)
	}
	rc, err := cfg.RESTClientGetter.ToRESTConfig()
	if err != nil {
		t.Fatal(err)
	}
	if im := rc.Impersonate; im.UserName != "alice" || im.UID != "u1" || im.Groups[0] != "dev" || im.Extra["scope"][0] != "x" {
		t.Errorf("impersonation %+v", im)
	}
	if f.rest.Impersonate.UserName != "" {
		t.Error("the factory's own config was changed")
	}
	plain, _ := f.Configuration("ns")
	if rc, _ := plain.RESTClientGetter.ToRESTConfig(); rc.Impersonate.UserName != "" {
		t.Error("an action without impersonation impersonates")
	}
	if ns, _, _ := plain.RESTClientGetter.(*restGetter).ToRawKubeConfigLoader().Namespace(); ns != "ns" {
		t.Errorf("namespace of the getter %q", ns)
	}
}
