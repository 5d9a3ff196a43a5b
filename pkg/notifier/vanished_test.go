package notifier

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// A namespace deleted with pending work lost it with no final status event.
func TestPendingWorkOfADeletedNamespaceEndsFailed(t *testing.T) {
	for _, tc := range []struct {
		name     string
		ns       func(e *env) // what becomes of namespace ns
		reported bool
	}{
		{"namespace gone", func(e *env) {
			if err := e.c.CoreV1().Namespaces().Delete(ctx(e.t), "ns", metav1.DeleteOptions{}); err != nil {
				e.t.Fatal(err)
			}
		}, true},
		{"namespace terminating", func(e *env) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}, Status: corev1.NamespaceStatus{Phase: corev1.NamespaceTerminating}}
			if _, err := e.c.CoreV1().Namespaces().Update(ctx(e.t), ns, metav1.UpdateOptions{}); err != nil {
				e.t.Fatal(err)
			}
		}, true},
		{"namespace still there (a reservation undone)", func(*env) {}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.Reserve("web", release.ActionInstall, 1)
			key := "ns/" + release.SecretName("web", 1)
			m := e.Meta("web", 1)
			if err := e.c.CoreV1().Secrets("ns").Delete(ctx(t), m.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			tc.ns(e)
			e.svc.deleted(key, m) // what the informer's delete handler does
			for i := 0; i < 2; i++ {
				if err := e.svc.sync(ctx(t), key); err != nil {
					t.Fatal(err)
				}
			}
			got := e.sink.Events()
			if !tc.reported {
				if len(got) != 0 {
					t.Fatalf("reported %d events", len(got))
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("reported %d events, want one failed", len(got))
			}
			c, err := events.ParseStatus(got[0])
			if err != nil || c.Status != "failed" || c.RequestID != "req-web" || !strings.Contains(c.Reason, `namespace "ns" was deleted`) {
				t.Fatalf("reported %+v, %v", c, err)
			}
		})
	}
}
