package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// notifierRound is one round of the notifier section: records from..from+n-1 rewritten.
type notifierRound struct {
	enc     *storage.Secrets
	capture *capturingSecrets
	rec     func(name, status, desc string) *helmrelease.Release
	secrets typedcorev1.SecretInterface
	ns      string
	from, n int
	// mu guards got (event id to its arrival at the sink) and seen (name/status to the
	// plain watch's sight of the rewrite).
	mu        *sync.Mutex
	got, seen map[string]time.Time
}

// notifierRound rewrites r's records at -change-rate and returns every rewrite's latency to
// its event, the failed path's, the watch's (the floor) and the notifier's own part.
func (b *bench) notifierRound(ctx context.Context, r notifierRound) (all, failed, floor, own []sample, err error) {
	// Pre-encode the rewrites, so the schedule times the write and not our encoding.
	rewrites := make([]*corev1.Secret, r.n)
	for i := range rewrites {
		k := r.from + i
		name := fmt.Sprintf("r%d", k)
		status, desc := "deployed", "Install complete"
		if b.o.failedEvery > 0 && k%b.o.failedEvery == b.o.failedEvery-1 {
			status, desc = "failed", fmt.Sprintf("bench failure %d", k)
		}
		if err := r.enc.Update(release.SecretName(name, 1), r.rec(name, status, desc)); err != nil {
			return nil, nil, nil, nil, err
		}
		rewrites[i] = r.capture.last
	}
	scheduled := make([]time.Time, r.n)
	writes := openLoop(ctx, b.o.changeRate, time.Duration(r.n)*time.Second/time.Duration(b.o.changeRate), 100, func(i int) error {
		r.mu.Lock()
		scheduled[i] = time.Now()
		r.mu.Unlock()
		_, err := r.secrets.Update(ctx, rewrites[i], metav1.UpdateOptions{})
		return err
	})
	if writes.ok != writes.n {
		return nil, nil, nil, nil, fmt.Errorf("rewrites: %s", writes.note())
	}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < r.n; i++ {
		name := fmt.Sprintf("r%d", r.from+i)
		status := rewrites[i].Labels[release.LabelStatus]
		id := events.StatusEventID(r.ns, name, 1, status, "req-"+name)
		var at time.Time
		for {
			r.mu.Lock()
			at = r.got[id]
			r.mu.Unlock()
			if !at.IsZero() || time.Now().After(deadline) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		r.mu.Lock()
		sched, watched := scheduled[i], r.seen[name+"/"+status]
		r.mu.Unlock()
		smp := sample{d: at.Sub(sched)}
		if at.IsZero() {
			smp = sample{d: time.Since(sched), err: fmt.Errorf("no event %s within 30s", id)}
		}
		all = append(all, smp)
		if status == "failed" {
			failed = append(failed, smp)
		}
		if !watched.IsZero() {
			floor = append(floor, sample{d: watched.Sub(sched)})
			if !at.IsZero() {
				own = append(own, sample{d: at.Sub(watched)})
			}
		}
	}
	return all, failed, floor, own, nil
}
