package release

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/async-helm/async-helm/internal/fakekube"
	"helm.sh/helm/v3/pkg/chart"
)

func isErr(err, target error) bool { return errors.Is(err, target) }

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// newStore is a Store over a fake cluster whose clock is clock.
func newStore(t *testing.T) (*Store, *fakekube.Cluster, *fakekube.Clock) {
	t.Helper()
	clock := fakekube.NewClock(t0)
	c := fakekube.New(clock)
	return &Store{Client: c, Metadata: c.Metadata(), Clock: clock}, c, clock
}

func tiny() *chart.Metadata {
	return &chart.Metadata{Name: "tiny", Version: "1.0.0", APIVersion: "v2"}
}

func reserve(t *testing.T, s *Store, name string, action Action, id string) int {
	t.Helper()
	sec, err := s.Reserve(ctx(t), Reservation{Namespace: "ns", Name: name, Action: action, Chart: tiny(), RequestID: id,
		Values: map[string]any{"replicas": 2}, Event: []byte(`{"id":"` + id + `"}`)})
	if err != nil {
		t.Fatalf("reserve %s: %v", name, err)
	}
	r, ok := RevisionFromMeta(sec)
	if !ok {
		t.Fatalf("reservation %s has no revision labels: %v", sec.Name, sec.Labels)
	}
	return r.Version
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return c
}
