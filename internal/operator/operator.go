// Package operator gives local runs, benchmarks and tests an identity whose rights come
// from RBAC. submit refuses members of system:masters (the local cluster's admin is one),
// so they call submit as a ServiceAccount bound to cluster-admin instead, as a pipeline
// on a real cluster would.
package operator

import (
	"context"
	"fmt"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// The ServiceAccount's namespace and name.
const (
	Namespace = "async-helm-operator"
	Name      = "operator"
	// Binding is its ClusterRoleBinding to cluster-admin.
	Binding = "async-helm-operator"
)

// User is the ServiceAccount's user name, as TokenReview reports it.
const User = "system:serviceaccount:" + Namespace + ":" + Name

// Token makes sure the ServiceAccount and its cluster-admin binding exist (client must be
// allowed to create them) and returns a token of it valid for ttl, from the TokenRequest API.
func Token(ctx context.Context, client kubernetes.Interface, ttl time.Duration) (string, error) {
	create := func(what string, err error) error {
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create %s for the operator identity: %w", what, err)
		}
		return nil
	}
	_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}, metav1.CreateOptions{})
	if err := create("namespace", err); err != nil {
		return "", err
	}
	_, err = client.CoreV1().ServiceAccounts(Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: Name}}, metav1.CreateOptions{})
	if err := create("service account", err); err != nil {
		return "", err
	}
	_, err = client.RbacV1().ClusterRoleBindings().Create(ctx, &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: Binding},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: Namespace, Name: Name}},
	}, metav1.CreateOptions{})
	if err := create("cluster role binding", err); err != nil {
		return "", err
	}
	// The API server's RBAC sees a new binding a moment later: a token used at once would be
	// refused (seen on a freshly started cluster).
	if err := waitAllowed(ctx, client); err != nil {
		return "", err
	}
	secs := int64(ttl.Seconds())
	tr, err := client.CoreV1().ServiceAccounts(Namespace).CreateToken(ctx, Name,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of %s: %w", User, err)
	}
	return tr.Status.Token, nil
}

// waitAllowed waits until the API server authorizes the ServiceAccount through its binding.
func waitAllowed(ctx context.Context, client kubernetes.Interface) error {
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
			User: User, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + Namespace},
			ResourceAttributes: &authzv1.ResourceAttributes{Verb: "create", Resource: "secrets", Namespace: "default"},
		}}, metav1.CreateOptions{})
		if err == nil && r.Status.Allowed {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s is not authorized through its binding after 30s: %v", User, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
