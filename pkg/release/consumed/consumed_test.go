package consumed

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/async-helm/async-helm/internal/fakekube"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

func newStore(t *testing.T) (*Store, *fakekube.Clock, *fakekube.Cluster) {
	t.Helper()
	clock := fakekube.NewClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	c := fakekube.New(clock)
	return &Store{Client: c.Typed(), Namespace: "async-helm", Clock: clock}, clock, c
}

func rec(id, uid string) Record {
	return Record{RequestID: id, Namespace: "team", Name: "web", Action: "install", Revision: 1, SecretUID: k8stypes.UID("uid-" + uid)}
}

func TestConsumeFirstResumeElsewhere(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	first, err := s.Consume(ctx, rec("req-1", "a"))
	if err != nil || !first {
		t.Fatalf("first consume: first=%v err=%v", first, err)
	}
	first, err = s.Consume(ctx, rec("req-1", "a"))
	if err != nil || first {
		t.Fatalf("same uid must resume: first=%v err=%v", first, err)
	}
	_, err = s.Consume(ctx, rec("req-1", "b"))
	if !errors.Is(err, ErrConsumedElsewhere) || !strings.Contains(err.Error(), "uid-a") || !strings.Contains(err.Error(), "uid-b") {
		t.Fatalf("another uid: want ErrConsumedElsewhere naming both UIDs, got %v", err)
	}
	got, err := s.Lookup(ctx, "req-1")
	if err != nil || got == nil {
		t.Fatalf("lookup: %v %v", got, err)
	}
	want := rec("req-1", "a")
	want.At = got.At
	if *got != want || got.At.IsZero() {
		t.Fatalf("lookup = %+v, want %+v", *got, want)
	}
	if got, err := s.Lookup(ctx, "nope"); got != nil || err != nil {
		t.Fatalf("lookup of an unknown id = %v, %v; want nil, nil", got, err)
	}
}

func TestLeaseNameValidForAnyID(t *testing.T) {
	for _, id := range []string{"x", strings.Repeat("Z/", 120), "../../etc", "ÄÖ ü"} {
		n := LeaseName(id)
		if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 || len(n) > 63 {
			t.Errorf("LeaseName(%q) = %q: %v", id, n, errs)
		}
	}
	if LeaseName("a") == LeaseName("b") {
		t.Fatal("distinct ids share a name")
	}
}

func TestConsumeRefusesInvalid(t *testing.T) {
	s, _, _ := newStore(t)
	for _, r := range []Record{rec("", "a"), {RequestID: "r"}, rec(strings.Repeat("x", 300), "a")} {
		if _, err := s.Consume(context.Background(), r); !errors.Is(err, ErrInvalid) {
			t.Errorf("Consume(%+v) = %v, want ErrInvalid", r, err)
		}
	}
}

// A record that cannot be read is never taken for "not consumed".
func TestUnreadableRecordIsConsumedElsewhere(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: LeaseName("req-9"), Labels: map[string]string{Label: "true"}}}
	if _, err := s.Client.CoordinationV1().Leases("async-helm").Create(ctx, l, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Consume(ctx, rec("req-9", "a")); !errors.Is(err, ErrConsumedElsewhere) {
		t.Fatalf("want ErrConsumedElsewhere, got %v", err)
	}
}

func TestPrune(t *testing.T) {
	s, clock, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.Consume(ctx, rec("old", "a")); err != nil {
		t.Fatal(err)
	}
	clock.Add(2 * time.Hour)
	if _, err := s.Consume(ctx, rec("new", "b")); err != nil {
		t.Fatal(err)
	}
	n, err := s.Prune(ctx, time.Hour)
	if err != nil || n != 1 {
		t.Fatalf("prune = %d, %v; want 1", n, err)
	}
	if got, _ := s.Lookup(ctx, "old"); got != nil {
		t.Fatal("old record kept")
	}
	if got, _ := s.Lookup(ctx, "new"); got == nil {
		t.Fatal("new record pruned")
	}
	// Pruned means consumable again: only EVENT_MAX_AGE (checked on the signature) keeps
	// such an event out, which is why records must outlive it.
	if first, err := s.Consume(ctx, rec("old", "c")); err != nil || !first {
		t.Fatalf("after prune: first=%v err=%v", first, err)
	}
}

// The outcome the executor records is read back with the record; a record that was never
// consumed cannot take one.
func TestMarkDoneRecordsTheOutcome(t *testing.T) {
	s, _, _ := newStore(t)
	ctx := context.Background()
	if _, err := s.Consume(ctx, rec("req-u", "a")); err != nil {
		t.Fatal(err)
	}
	if got, err := s.Lookup(ctx, "req-u"); err != nil || got.Outcome != "" {
		t.Fatalf("before MarkDone: %+v, %v", got, err)
	}
	if err := s.MarkDone(ctx, "req-u", OutcomeUninstalled); err != nil {
		t.Fatal(err)
	}
	got, err := s.Lookup(ctx, "req-u")
	if err != nil || got.Outcome != OutcomeUninstalled || got.SecretUID != "uid-a" {
		t.Fatalf("after MarkDone: %+v, %v", got, err)
	}
	if err := s.MarkDone(ctx, "never-consumed", OutcomeUninstalled); err == nil {
		t.Fatal("MarkDone of a request never consumed succeeded")
	}
}
