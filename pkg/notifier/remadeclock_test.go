package notifier

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/release"
)

// Attack (hostile-tenant review): a queued reservation's clock was its Secret's
// creationTimestamp. The API server sets it, but a namespace editor who deletes the Secret
// and makes it again (same name, labels, seal and payload, sent-at dated a century ahead so
// no re-send is ever due) gets a new one: done every 50 minutes, its sealed queued record
// held its MAX_QUEUED slot past QUEUE_DEADLINE for ever. Its clock is now never later than
// the sweeper's first sight of the seal's key (namespace, Secret name, request id), which
// a new Secret does not change.
func TestRemadeReservationDoesNotOutliveTheDeadline(t *testing.T) {
	e := newEnv(t)
	e.svc.Sweep.Interval = 0
	e.store.SealKey = signingKey
	e.reserve("web", release.ActionInstall, 1)
	secrets := e.c.CoreV1().Secrets("ns")
	name := release.SecretName("web", 1)
	failedAt := failedUnderRewrites(t, e, func() { // the Secret made again
		kept, err := secrets.Get(ctx(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if err := secrets.Delete(ctx(t), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		ann := map[string]string{release.AnnotationSentAt: e.clock.Now().Add(100 * 365 * 24 * time.Hour).Format(time.RFC3339Nano)}
		again := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: kept.Labels, Annotations: ann},
			Type: kept.Type, Data: kept.Data}
		if _, err := secrets.Create(ctx(t), again, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	})
	if failedAt < 0 {
		t.Fatalf("the reservation the tenant makes again every 50 minutes is still pending and queued after 3 h (QUEUE_DEADLINE %s): it holds its slot for ever",
			e.svc.Sweep.QueueDeadline)
	}
	if limit := e.svc.Sweep.QueueDeadline + 10*time.Minute; failedAt > limit {
		t.Errorf("failed %s after the reservation; want within %s", failedAt, limit)
	}
}
