// Package satoken gets real ServiceAccount tokens from the TokenRequest API for tests that
// must act as a ServiceAccount itself rather than as an admin impersonating it: a token
// bound to a running pod carries the extras (pod name and uid, node name and uid,
// credential id) that a pipeline's token carries.
package satoken

import (
	"context"
	"fmt"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Request returns a token of the ServiceAccount ns/sa (which must exist), bound to nothing.
func Request(ctx context.Context, client kubernetes.Interface, ns, sa string, ttl time.Duration) (string, error) {
	secs := int64(ttl.Seconds())
	tr, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &secs}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of service account %s/%s: %w", ns, sa, err)
	}
	return tr.Status.Token, nil
}

// ForPod creates the ServiceAccount ns/sa (if missing) and a pod running as it, waits until
// the pod is scheduled on a node, and returns a token bound to that pod, as the kubelet
// would mount it (Tekton's task pods run with such tokens).
func ForPod(ctx context.Context, client kubernetes.Interface, ns, sa string) (string, error) {
	_, err := client.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", fmt.Errorf("create service account %s/%s: %w", ns, sa, err)
	}
	pod, err := client.CoreV1().Pods(ns).Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{GenerateName: sa + "-"},
		Spec: corev1.PodSpec{ServiceAccountName: sa, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "step", Image: "registry.example/pipeline-step:1"}}},
	}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("create a pod running as %s/%s: %w", ns, sa, err)
	}
	// Scheduled: the token then names the node too.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods(ns).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		pod = p
		return p.Spec.NodeName != "", nil
	})
	if err != nil {
		return "", fmt.Errorf("pod %s/%s was not scheduled: %w", ns, pod.Name, err)
	}
	secs := int64(3600)
	tr, err := client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{
		ExpirationSeconds: &secs,
		BoundObjectRef:    &authnv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: pod.Name, UID: pod.UID},
	}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token of %s/%s bound to pod %s: %w", ns, sa, pod.Name, err)
	}
	return tr.Status.Token, nil
}

// Config is a REST config that authenticates with token alone (no client certificate or
// other credential of base).
func Config(base *rest.Config, token string) *rest.Config {
	cfg := rest.AnonymousClientConfig(base)
	cfg.BearerToken = token
	return cfg
}
