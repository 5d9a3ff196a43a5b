package repos

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	chartsource "github.com/async-helm/async-helm/pkg/chart/source"
)

func authSecret(name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "team-a"}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func callerCtx(user string) context.Context {
	return chartsource.WithCaller(context.Background(), chartsource.Caller{User: user})
}

// Submit reads a chart's basic auth Secret only after the caller's access review allows it.
func TestReviewedAuthSecrets(t *testing.T) {
	client := fake.NewClientset(authSecret("chart-auth", map[string]string{"username": "u", "password": "p"}),
		authSecret("no-password", map[string]string{"username": "u"}))
	var reviewed []string
	r := ReviewedAuthSecrets{Client: client, MayGet: func(_ context.Context, c chartsource.Caller, ns, name string) error {
		reviewed = append(reviewed, c.User+" "+ns+"/"+name)
		if c.User != "alice" {
			return errors.New("forbidden: cannot get secrets/" + name)
		}
		return nil
	}}
	if c, err := r.ReadAuthSecret(callerCtx("alice"), "team-a", "chart-auth"); err != nil || c.Username != "u" || c.Password != "p" {
		t.Errorf("alice: %+v %v", c, err)
	}
	client.ClearActions()
	if _, err := r.ReadAuthSecret(callerCtx("mallory"), "team-a", "chart-auth"); err == nil || !strings.Contains(err.Error(), "nothing was fetched") {
		t.Errorf("mallory: %v", err)
	}
	if n := len(client.Actions()); n != 0 {
		t.Errorf("the Secret was read for a caller the review refused (%d calls)", n)
	}
	if _, err := r.ReadAuthSecret(context.Background(), "team-a", "chart-auth"); !errors.Is(err, chartsource.ErrCredentialsRefused) {
		t.Errorf("no caller: %v", err)
	}
	if _, err := r.ReadAuthSecret(callerCtx("alice"), "team-a", "missing"); !errors.Is(err, chartsource.ErrAuthSecret) {
		t.Errorf("missing: %v", err)
	}
	if _, err := r.ReadAuthSecret(callerCtx("alice"), "team-a", "no-password"); !errors.Is(err, chartsource.ErrAuthSecret) {
		t.Errorf("no password key: %v", err)
	}
	// Authentication off: an empty caller, no review, submit's own read.
	if _, err := (ReviewedAuthSecrets{Client: client}).ReadAuthSecret(callerCtx(""), "team-a", "chart-auth"); err != nil {
		t.Errorf("authentication off: %v", err)
	}
	if len(reviewed) != 4 || reviewed[0] != "alice team-a/chart-auth" || reviewed[1] != "mallory team-a/chart-auth" {
		t.Errorf("reviews %q", reviewed)
	}
}

// The executor reads a chart's basic auth Secret impersonating the caller: the API server's
// refusal is ErrCredentialsRefused.
func TestCallerCheckedReadsAuthSecretsAsTheCaller(t *testing.T) {
	var as []string
	c := CallerChecked{AsCaller: func(caller chartsource.Caller) (kubernetes.Interface, error) {
		as = append(as, caller.User)
		client := fake.NewClientset(authSecret("chart-auth", map[string]string{"username": "u", "password": "p"}))
		if caller.User != "alice" {
			client.PrependReactor("get", "secrets", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "chart-auth", errors.New("RBAC"))
			})
		}
		return client, nil
	}}
	if cr, err := c.ReadAuthSecret(callerCtx("alice"), "team-a", "chart-auth"); err != nil || cr.Username != "u" {
		t.Errorf("alice: %+v %v", cr, err)
	}
	if _, err := c.ReadAuthSecret(callerCtx("mallory"), "team-a", "chart-auth"); !errors.Is(err, chartsource.ErrCredentialsRefused) || !strings.Contains(err.Error(), `"mallory"`) {
		t.Errorf("mallory: %v", err)
	}
	if _, err := c.ReadAuthSecret(context.Background(), "team-a", "chart-auth"); !errors.Is(err, chartsource.ErrCredentialsRefused) {
		t.Errorf("no caller: %v", err)
	}
	if len(as) != 2 || as[0] != "alice" || as[1] != "mallory" {
		t.Errorf("impersonated %q", as)
	}
	var _ chartsource.AuthSecretReader = c // the executor's Source.AuthSecrets
}
