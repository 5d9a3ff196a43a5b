package main

import (
	"context"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/internal/testsink"
	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/release"
)

// On the local cluster: a namespace editor writes the queued label back onto its own
// finished, sealed record (the seal survived Helm's rewrite), so that it counts toward
// MAX_QUEUED again. The notifier's sweep drops the label; the record stays deployed.
func TestSweepDropsTheQueuedLabelWrittenBackOntoAFinishedRecord(t *testing.T) {
	ns := cluster.Namespace(t)
	sink, redrive := testsink.Start(t), testsink.Start(t)
	startNotifier(t, ns, sink, Config{Watch: true, SweepInterval: 300 * time.Millisecond, RedriveAfter: time.Hour,
		ReaperGrace: time.Hour, QueueDeadline: time.Hour, RedriveSink: redrive.URL, EventSigningKey: testKey, EventMaxAge: time.Hour})
	h := newHelmSide(t, ns)
	h.store.SealKey = []byte(testKey)
	h.reserve(t, "web", release.ActionInstall)
	h.set(t, "web", 1, helmrelease.StatusDeployed, "Install complete")
	secrets := cluster.Client.CoreV1().Secrets(ns)
	if _, err := secrets.Patch(context.Background(), release.SecretName("web", 1), types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+release.LabelQueued+`":"true"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	key := []byte(testKey)
	counts := func() bool {
		sec, err := secrets.Get(context.Background(), release.SecretName("web", 1), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return release.CountsAsQueued(key, sec)
	}
	if !counts() {
		t.Fatal("setup: the relabelled record does not count as queued")
	}
	testwait.Within(t, 20*time.Second, "the queued label dropped", func() bool { return !counts() })
	if rel, err := h.store.Get(context.Background(), ns, "web", 1); err != nil || rel.Info.Status != helmrelease.StatusDeployed {
		t.Errorf("the record after the sweep: %v, %v", rel.Info.Status, err)
	}
}
