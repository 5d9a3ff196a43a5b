package ledger

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// BenchmarkAddOnTheCluster is the write the ledger adds to the path to 201 (one Lease
// create in async-helm's namespace), beside the write that path already makes (the
// reservation: a Secret create of a tiny chart's size), on KUBECONFIG's cluster.
func BenchmarkAddOnTheCluster(b *testing.B) {
	path := os.Getenv("KUBECONFIG")
	if path == "" {
		b.Skip("KUBECONFIG is not set")
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		b.Fatal(err)
	}
	cfg.QPS, cfg.Burst = -1, 0
	cl := kubernetes.NewForConfigOrDie(cfg)
	ctx := context.Background()
	ns := fmt.Sprintf("ledger-bench-%d", time.Now().UnixNano())
	if _, err := cl.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cl.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{}) }()
	s := &Store{Client: cl, Namespace: ns}
	payload := map[string][]byte{"release": make([]byte, 4<<10)}
	b.Run("ledger entry", func(b *testing.B) {
		i := 0
		for b.Loop() {
			if err := s.Add(ctx, Entry{RequestID: fmt.Sprint("r", i), Namespace: "t", Caller: "c", SecretName: "s", At: time.Now()}); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("reservation-sized Secret", func(b *testing.B) {
		i := 0
		for b.Loop() {
			sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("s", i), Labels: map[string]string{"owner": "helm"}}, Data: payload}
			if _, err := cl.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
}
