package notifier

import (
	"context"
	"fmt"
	"sync"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/metadata"

	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// A failure's reason is read at the resourceVersion the index saw (the API server's watch
// cache answers, not a quorum read of etcd); a status whose chart the labels carry reads
// nothing.
func TestDescribeReadsOnlyWhenNeededAtTheIndexedVersion(t *testing.T) {
	e := newEnv(t)
	e.Reserve("web", release.ActionInstall, 1)
	e.Set("web", 1, helmrelease.StatusFailed, "hook failed: boom")
	rev := e.Revision("web", 1)
	if rev.ResourceVersion == "" {
		t.Fatal("the fake cluster gave no resourceVersion")
	}

	e.c.ClearActions()
	var c events.StatusChange
	if err := e.svc.describe(ctx(t), rev, "deployed", &c); err != nil {
		t.Fatal(err)
	}
	if gets := e.SecretGets(); len(gets) != 0 || c.Chart != "tiny" || c.ChartVersion != "1.0.0" {
		t.Errorf("deployed with a chart label: %d reads, %+v", len(gets), c)
	}

	e.c.ClearActions()
	c = events.StatusChange{}
	if err := e.svc.describe(ctx(t), rev, "failed", &c); err != nil {
		t.Fatal(err)
	}
	if gets := e.SecretGets(); len(gets) != 1 || gets[0] != rev.ResourceVersion {
		t.Errorf("failed: reads at resourceVersions %q, want one at %q", gets, rev.ResourceVersion)
	}
	if c.Reason != "hook failed: boom" || c.Chart != "tiny" || c.ChartVersion != "1.0.0" {
		t.Errorf("failed: %+v", c)
	}

	// Deleted meanwhile: the event goes out with what the labels say.
	if err := e.c.CoreV1().Secrets("ns").Delete(ctx(t), rev.SecretName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c = events.StatusChange{}
	if err := e.svc.describe(ctx(t), rev, "failed", &c); err != nil || c.Reason != "" || c.Chart != "tiny" {
		t.Errorf("deleted record: %v, %+v", err, c)
	}
}

// blockingSender holds every send until released, counting how many are in flight.
type blockingSender struct {
	mu       sync.Mutex
	inFlight int
	max      int
	release  chan struct{}
}

func (b *blockingSender) Send(ctx context.Context, _ cloudevents.Event) error {
	b.mu.Lock()
	b.inFlight++
	b.max = max(b.max, b.inFlight)
	b.mu.Unlock()
	defer func() {
		b.mu.Lock()
		b.inFlight--
		b.mu.Unlock()
	}()
	select {
	case <-b.release:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (b *blockingSender) counts() (int, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.inFlight, b.max
}

// Reporting is I/O-bound: by default DefaultWorkers changes are worked on at once (4 did
// not keep up with 50 full-secret rewrites a second), and no more.
func TestDefaultWorkersWorkInParallel(t *testing.T) {
	e := newEnv(t)
	b := &blockingSender{release: make(chan struct{})}
	e.svc.Sender = b
	for i := 0; i < DefaultWorkers+5; i++ {
		e.Reserve(fmt.Sprintf("r%d", i), release.ActionInstall, 1)
	}
	if err := e.svc.Start(ctx(t), false); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, func() bool { n, _ := b.counts(); return n == DefaultWorkers })
	close(b.release)
	testwait.For(t, func() bool { n, _ := b.counts(); return n == 0 && e.svc.queue.Len() == 0 })
	if _, most := b.counts(); most != DefaultWorkers {
		t.Errorf("at most %d sends at once, want %d", most, DefaultWorkers)
	}
}

// patchCounter counts the merge patches asked of the metadata client.
type patchCounter struct {
	metadata.Interface
	patches *int
}

func (p patchCounter) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return patchCounterGetter{p.Interface.Resource(gvr), p.patches}
}

type patchCounterGetter struct {
	metadata.Getter
	patches *int
}

func (g patchCounterGetter) Namespace(ns string) metadata.ResourceInterface {
	return patchCounterResource{g.Getter.Namespace(ns), g.patches}
}

type patchCounterResource struct {
	metadata.ResourceInterface
	patches *int
}

func (r patchCounterResource) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, o metav1.PatchOptions, sub ...string) (*metav1.PartialObjectMetadata, error) {
	*r.patches++
	return r.ResourceInterface.Patch(ctx, name, pt, data, o, sub...)
}

// The reported status is recorded through the metadata client (the API server answers
// with metadata, not the whole record), still as a compare-and-swap.
func TestMarkNotifiedAsksForMetadataOnly(t *testing.T) {
	e := newEnv(t)
	patches := 0
	e.store.Metadata = patchCounter{e.c.Metadata(), &patches}
	e.Reserve("web", release.ActionInstall, 1)
	e.Set("web", 1, helmrelease.StatusDeployed, "")
	rev := e.Revision("web", 1)
	if err := e.svc.markNotified(ctx(t), rev); err != nil {
		t.Fatal(err)
	}
	if got := e.Revision("web", 1).Notified; got != "deployed" || patches != 1 {
		t.Errorf("notified %q after %d metadata patches, want deployed after 1", got, patches)
	}
	// Stale: Helm wrote again since; nothing is recorded over it.
	e.Set("web", 1, helmrelease.StatusFailed, "boom")
	if err := e.svc.markNotified(ctx(t), rev); err != nil || e.Revision("web", 1).Notified != "" {
		t.Errorf("stale mark: %v, notified %q", err, e.Revision("web", 1).Notified)
	}
}
