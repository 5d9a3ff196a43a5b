package api

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"
)

// The queue is a new optional field: answers without it keep their old shape, answers with
// it add "queue" beside Helm's fields.
func TestQueueShapes(t *testing.T) {
	rel := &release.Release{Name: "web", Namespace: "team", Version: 1,
		Info:  &release.Info{Status: release.StatusPendingInstall},
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "hello", Version: "0.1.0"}}}
	q := &Queue{State: QueueStateQueued, Position: 312, Total: 1200,
		AcceptedAt: time.Date(2026, 12, 3, 23, 0, 0, 0, time.UTC), AgeSeconds: 130}
	info := Limit(rel)
	plain, err := json.Marshal(info)
	if err != nil || strings.Contains(string(plain), "queue") {
		t.Fatalf("a list row without a queue: %s %v", plain, err)
	}
	info.Queue = q
	golden(t, "list-row-queued.answer", info)
	golden(t, "release-queued.answer", Release{Release: rel, Queue: q})
}
