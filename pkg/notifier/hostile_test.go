package notifier

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/release"
)

// hostileRecord is what a namespace editor can write: Helm's labels and ours (pending,
// queued, dead-lettered) on a payload that does not decode.
func (e *env) hostileRecord(name string, data map[string][]byte) {
	e.t.Helper()
	if data == nil {
		data = map[string][]byte{"release": []byte("garbage")}
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: release.SecretName(name, 1), Namespace: "ns",
		Labels: map[string]string{release.LabelOwner: release.OwnerHelm, release.LabelName: name,
			release.LabelStatus: "pending-install", release.LabelVersion: "1", release.LabelRevision: "1",
			release.LabelQueued: "true", release.LabelRequestID: "req-" + name},
		Annotations: map[string]string{release.AnnotationDeadLettered: t0.Format("2006-01-02T15:04:05Z")}},
		Type: release.SecretType, Data: data}
	if _, err := e.c.CoreV1().Secrets("ns").Create(ctx(e.t), sec, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// Helm v3.21.4's Secrets.Get dereferences nil on such a record: the sweep panicked and the
// notifier exited, for every tenant.
func TestSweepSurvivesAnUndecodableRecord(t *testing.T) {
	e := newEnv(t)
	e.hostileRecord("evil", nil)
	res, err := e.svc.SweepOnce(ctx(t))
	if err != nil || res.Failed != 1 {
		t.Fatalf("sweep: %+v %v", res, err)
	}
	rev := e.revision("evil", 1)
	if rev.Status != "failed" || rev.Queued || !strings.Contains(rev.Failure, "does not decode") {
		t.Fatalf("revision after the sweep: %+v", rev)
	}
	if res, err := e.svc.SweepOnce(ctx(t)); err != nil || res != (SweepResult{}) {
		t.Fatalf("second sweep: %+v %v", res, err)
	}
}

// A failed record that does not decode (any tenant's, ours or not) is reported from its
// labels: before, describe's decode error retried it for ever and nothing was reported.
func TestFailedUndecodableRecordIsReportedFromItsLabels(t *testing.T) {
	e := newEnv(t)
	e.hostileRecord("evil", nil)
	e.patch("evil", 1, `{"metadata":{"labels":{"status":"failed","async-helm.io/revision":null,"async-helm.io/chart":null}}}`)
	key := "ns/" + release.SecretName("evil", 1)
	if err := e.svc.sync(ctx(t), key); err != nil {
		t.Fatalf("sync: %v", err)
	}
	if got := e.sink.statuses(t); len(got) != 1 || got[0] != "failed" {
		t.Fatalf("reported %v", got)
	}
}
