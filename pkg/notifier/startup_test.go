package notifier

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"

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
