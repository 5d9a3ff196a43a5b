package notifier

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/release"
)

// heldSender holds the events of the start-up backlog's revisions (named old*) until gate
// closes, counting how many it holds at most at once; it records every subject sent.
type heldSender struct {
	gate       chan struct{}
	mu         sync.Mutex
	held, most int
	sent       map[string]bool
}

func (h *heldSender) Send(ctx context.Context, e cloudevents.Event) error {
	hold := strings.HasPrefix(e.Subject(), "ns/old")
	h.mu.Lock()
	h.sent[e.Subject()] = true
	if hold {
		h.held++
		h.most = max(h.most, h.held)
	}
	h.mu.Unlock()
	if hold {
		select {
		case <-h.gate:
		case <-ctx.Done():
		}
		h.mu.Lock()
		h.held--
		h.mu.Unlock()
	}
	return nil
}

func (h *heldSender) state() (held, most, sent int, live bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held, h.most, len(h.sent), h.sent["ns/live"]
}

// A fresh notifier reports its start-up backlog (records written while none ran) at most
// StartupAtOnce at a time: a change made meanwhile is reported while the backlog's
// reports are still held, by the workers left over. Before, the backlog took every worker
// (16 held here) and the live change waited behind all 40.
func TestTheStartupBacklogLeavesWorkersForLiveChanges(t *testing.T) {
	e := newEnv(t)
	const backlog = 40
	for i := range backlog {
		e.Reserve(fmt.Sprintf("old%d", i), release.ActionInstall, 1)
	}
	h := &heldSender{gate: make(chan struct{}), sent: map[string]bool{}}
	e.svc.Sender, e.svc.Workers = h, 2*StartupAtOnce
	if err := e.svc.Start(ctx(t), true); err != nil {
		t.Fatal(err)
	}
	testwait.For(t, func() bool { held, _, _, _ := h.state(); return held == StartupAtOnce })
	e.Reserve("live", release.ActionInstall, 1)
	testwait.Within(t, testwait.Timeout, "the live change reported while the backlog is held", func() bool {
		_, _, _, live := h.state()
		return live
	})
	close(h.gate)
	testwait.For(t, func() bool { _, _, sent, _ := h.state(); return sent == backlog+1 })
	if _, most, _, _ := h.state(); most > StartupAtOnce {
		t.Errorf("%d of the start-up backlog's reports at once, want at most %d", most, StartupAtOnce)
	}
}

// The start-up backlog is fed one namespace at a time in turn: a tenant with many records
// never reported does not hold back another namespace's, which a first list (sorted by
// namespace) finds after them. The first StartupAtOnce are queued as listed; of the next
// two places freed, one goes to the other namespace.
func TestTheStartupBacklogTakesNamespacesInTurn(t *testing.T) {
	e := newEnv(t)
	meta := func(ns, name string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: release.SecretName(name, 1),
			Labels: map[string]string{release.LabelOwner: release.OwnerHelm, release.LabelName: name,
				release.LabelVersion: "1", release.LabelStatus: "deployed"}}}
	}
	for i := range 100 {
		e.svc.enqueueAdded(meta("a", fmt.Sprintf("r%d", i)), true)
	}
	e.svc.enqueueAdded(meta("b", "web"), true)
	get := func() string {
		key, quit := e.svc.queue.Get()
		if quit {
			t.Fatal("queue shut down")
		}
		return key
	}
	var first []string
	for range StartupAtOnce {
		first = append(first, get())
	}
	var next []string
	for _, done := range first[:2] {
		e.svc.queue.Done(done)
		e.svc.startupDone(done)
		next = append(next, get())
	}
	if !slices.Contains(next, "b/"+release.SecretName("web", 1)) {
		t.Errorf("after the first %d of the start-up backlog, the next two queued are %v, not the other namespace's", StartupAtOnce, next)
	}
}
