package main

import (
	"context"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/testsink"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// One hand-made Secret with Helm's labels and ours (pending, queued, dead-lettered) and a
// payload that does not decode made Helm's Secrets.Get dereference nil: the notifier exited
// on its next sweep, for every tenant. Now the record is failed in its labels, reported once,
// and the notifier goes on reporting the others.
func TestUndecodableRecordDoesNotStopTheNotifier(t *testing.T) {
	ns := cluster.Namespace(t)
	sink, redrive := testsink.Start(t), testsink.Start(t)
	startNotifier(t, ns, sink, Config{Watch: true, SweepInterval: 300 * time.Millisecond, RedriveAfter: time.Hour,
		ReaperGrace: time.Hour, QueueDeadline: time.Hour, RedriveSink: redrive.URL, EventSigningKey: testKey, EventMaxAge: time.Hour})
	h := newHelmSide(t, ns)
	evil := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: release.SecretName("evil", 1),
		Labels: map[string]string{release.LabelOwner: release.OwnerHelm, release.LabelName: "evil",
			release.LabelStatus: "pending-install", release.LabelVersion: "1", release.LabelRevision: "1",
			release.LabelQueued: "true", release.LabelRequestID: "req-evil"},
		Annotations: map[string]string{release.AnnotationDeadLettered: time.Now().UTC().Format(time.RFC3339)}},
		Type: release.SecretType, Data: map[string][]byte{"release": []byte("garbage")}}
	if _, err := cluster.Client.CoreV1().Secrets(ns).Create(context.Background(), evil, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	failedID := events.StatusEventID(ns, "evil", 1, "failed", "req-evil")
	evs := sink.WaitFor(t, 20*time.Second, "the undecodable record failed", func(e []cloudevents.Event) bool { return has(e, failedID) })
	var change events.StatusChange
	for _, e := range evs {
		if e.ID() == failedID {
			if err := e.DataAs(&change); err != nil {
				t.Fatal(err)
			}
		}
	}
	if !strings.Contains(change.Reason, "does not decode") {
		t.Errorf("failed without saying why: %+v", change)
	}
	// Still alive: another release's transitions are reported.
	h.reserve(t, "web", release.ActionInstall)
	h.set(t, "web", 1, helmrelease.StatusDeployed, "Install complete")
	deployedID := events.StatusEventID(ns, "web", 1, "deployed", "req-web")
	sink.WaitFor(t, 20*time.Second, "a later release reported", func(e []cloudevents.Event) bool { return has(e, deployedID) })
	if n := len(redrive.Events()); n != 0 {
		t.Errorf("%d events re-sent for a record that does not decode", n)
	}
}

// A namespace deleted with pending work lost it with no final status event: now the
// revision that vanished with it ends with one failed event saying so.
func TestPendingWorkOfADeletedNamespaceEndsFailed(t *testing.T) {
	ns, sink, _, _ := pendingWeb(t)
	if err := cluster.Client.CoreV1().Namespaces().Delete(context.Background(), ns, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	failedID := events.StatusEventID(ns, "web", 1, "failed", "req-web")
	// The event follows the namespace controller's deletion of the Secret, which waits in
	// its queue behind every other test's namespace: over 60 s once on a loaded machine.
	evs := sink.WaitFor(t, 2*time.Minute, "the final failed event", func(e []cloudevents.Event) bool { return has(e, failedID) })
	for _, e := range evs {
		if e.ID() != failedID {
			continue
		}
		var c events.StatusChange
		if err := e.DataAs(&c); err != nil || !strings.Contains(c.Reason, "was deleted") {
			t.Errorf("final event %+v, %v", c, err)
		}
	}
}
