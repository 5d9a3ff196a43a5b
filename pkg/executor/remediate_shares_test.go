package executor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// A retry gives its action slot back between attempts: with one slot, A's first attempt
// fails while B's delivery waits; B runs before A's second attempt. Before, the retry kept
// the slot and B ran after A's whole chain.
func TestRetryQueuesBehindAnotherTenant(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		e := newEnv(t, 1)
		e.svc.SlotWait = time.Hour
		release1 := make(chan struct{})
		var mu sync.Mutex
		var order []string
		e.helm.run = func(ctx context.Context, req helmexec.Request) (*helmrelease.Release, error) {
			mu.Lock()
			order = append(order, fmt.Sprintf("%s v%d", req.Namespace, req.Revision))
			mu.Unlock()
			if req.Namespace != "a" || req.Revision != 1 {
				return e.writes(ctx, req)
			}
			<-release1
			d := storage.NewSecrets(e.c.CoreV1().Secrets(req.Namespace))
			key := release.SecretName(req.Name, req.Revision)
			rel, err := d.Get(key)
			if err != nil {
				return nil, err
			}
			rel.Info.Status, rel.Info.Description = helmrelease.StatusFailed, "hook failed"
			return rel, errors.Join(d.Update(key, rel), errors.New("pre-install hook failed"))
		}
		a := e.reserveAs("a", "", "web", "a-1") // no caller: the retry reserves through the store
		a.Options.Retries = 1
		outcomes := make(chan Outcome, 2)
		go func() { o, _ := e.svc.Handle(ctx(t), context.Background(), a, nil); outcomes <- o }()
		synctest.Wait() // A's first attempt runs
		b := e.reserveAs("b", "bob", "tiny", "b-1")
		go func() { o, _ := e.svc.Handle(ctx(t), context.Background(), b, nil); outcomes <- o }()
		synctest.Wait() // B waits in its queue
		close(release1)
		for range 2 {
			if o := <-outcomes; o != OutcomeDeployed {
				t.Errorf("outcome %s", o)
			}
		}
		if want := []string{"a v1", "b v1", "a v2"}; !slices.Equal(order, want) {
			t.Errorf("Helm ran %v, want %v", order, want)
		}
	})
}
