package main

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// Since (notifier.Service) is no later than when the notifiers first ran, from state no
// one but async-helm's installer writes: the creation of async-helm's own namespace. The
// election Lease deleted (by an admin, or lost) and made again by the next leader, or not
// there at all, does not move it: changes made while every notifier was down stay news.
// Without an election it is zero (report everything not marked).
func TestSinceDoesNotMoveWithTheElectionLease(t *testing.T) {
	ctx := context.Background()
	cfg := Config{LeaderElection: true, OwnNamespace: "async-helm"}
	installed := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	own := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "async-helm", CreationTimestamp: metav1.NewTime(installed)}}
	remade := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "async-helm", Name: cfg.ElectionName(),
		CreationTimestamp: metav1.NewTime(installed.Add(30 * 24 * time.Hour))}}
	for name, c := range map[string]*fake.Clientset{
		"the Lease made again a month later": fake.NewClientset(own, remade),
		"no Lease (deleted, or none yet)":    fake.NewClientset(own),
	} {
		if got, err := (&Function{cfg: cfg}).since(ctx, c); err != nil || !got.Equal(installed) {
			t.Errorf("%s: %s, %v; want the namespace's creation %s", name, got, err, installed)
		}
	}
	if got, err := (&Function{cfg: cfg}).since(ctx, fake.NewClientset(remade)); err == nil {
		t.Errorf("its own namespace unreadable: %s, want an error", got)
	}
	cfg.LeaderElection = false
	if got, err := (&Function{cfg: cfg}).since(ctx, fake.NewClientset(own, remade)); err != nil || !got.IsZero() {
		t.Errorf("no election: %s, %v; want zero", got, err)
	}
}
