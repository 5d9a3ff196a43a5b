package main

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// Since (notifier.Service) is when the notifiers first ran: their election Lease's creation,
// now when this pod is the first, zero (report everything not marked) without an election.
func TestSinceIsTheElectionLeasesCreation(t *testing.T) {
	ctx := context.Background()
	cfg := Config{LeaderElection: true, OwnNamespace: "async-helm"}
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	withLease := fake.NewClientset(&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{
		Namespace: "async-helm", Name: cfg.ElectionName(), CreationTimestamp: metav1.NewTime(created)}})
	got, err := (&Function{cfg: cfg}).since(ctx, withLease)
	if err != nil || !got.Equal(created) {
		t.Errorf("with the Lease: %s, %v; want its creation %s", got, err, created)
	}
	before := time.Now()
	got, err = (&Function{cfg: cfg}).since(ctx, fake.NewClientset())
	if err != nil || got.Before(before) {
		t.Errorf("the first notifier: %s, %v; want now", got, err)
	}
	cfg.LeaderElection = false
	if got, err = (&Function{cfg: cfg}).since(ctx, withLease); err != nil || !got.IsZero() {
		t.Errorf("no election: %s, %v; want zero", got, err)
	}
}
