package reader

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	testingclock "k8s.io/utils/clock/testing"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/ledger"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/release"
)

// queueAt answers fixed positions, and records what it was asked.
type queueAt struct {
	at    map[string]ledger.Position
	asked []string
}

func (q *queueAt) QueuePosition(ns, secret string) (ledger.Position, bool) {
	q.asked = append(q.asked, ns+"/"+secret)
	p, ok := q.at[ns+"/"+secret]
	return p, ok
}

// noProgress is a revision no executor has written progress for.
type noProgress struct{}

func (noProgress) Progress(context.Context, string, string) (*progress.Progress, error) {
	return nil, nil
}

// get and list (both shapes) say a pending revision no executor started is queued, with
// its position and age; final revisions are not looked up, and a revision with progress on
// its Lease has started whatever the index says.
func TestQueueInGetAndList(t *testing.T) {
	s, _ := newService(t)
	accepted := time.Date(2026, 12, 3, 23, 0, 0, 0, time.UTC)
	idx := &queueAt{at: map[string]ledger.Position{
		"team-a/" + release.SecretName("db", 1): {Position: 312, Total: 1200, AcceptedAt: accepted}}}
	s.Queue = &Queue{Index: idx, Clock: testingclock.NewFakePassiveClock(accepted.Add(130 * time.Second))}
	s.Progress = noProgress{}
	want := api.Queue{State: "queued", Position: 312, Total: 1200, AcceptedAt: accepted, AgeSeconds: 130}

	db, err := s.Latest(ctx(t), nil, "team-a", "db")
	if err != nil || db.Queue == nil || *db.Queue != want {
		t.Fatalf("Latest: queue %+v, %v; want %+v", db.Queue, err, want)
	}
	rows, err := s.List(ctx(t), nil, "team-a", true)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows.([]api.ReleaseInfo) {
		if (r.Queue != nil) != (r.Name == "db") || (r.Queue != nil && *r.Queue != want) {
			t.Errorf("limitInfo row %s: queue %+v", r.Name, r.Queue)
		}
	}
	raw, _ := json.Marshal(rows)
	if !strings.Contains(string(raw), `"queue":{"state":"queued","position":312,"total":1200,"acceptedAt":"2026-12-03T23:00:00Z","ageSeconds":130}`) {
		t.Errorf("JSON %s", raw)
	}
	full, err := s.List(ctx(t), nil, "team-a", false)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range full.([]api.Release) {
		if (r.Queue != nil) != (r.Name == "db") {
			t.Errorf("full row %s: queue %+v", r.Name, r.Queue)
		}
	}
	if len(idx.asked) != 3 {
		t.Errorf("index asked %v, want the pending revision once per read", idx.asked)
	}
	// Progress on the Lease: an executor started it.
	s.Progress = &progressOf{}
	if db, err := s.Latest(ctx(t), nil, "team-a", "db"); err != nil || db.Queue != nil || db.Progress == nil {
		t.Errorf("started revision: queue %+v progress %+v, %v", db.Queue, db.Progress, err)
	}
	// Not in the index (started, or unsealed): no queue.
	idx.at, s.Progress = nil, noProgress{}
	if db, err := s.Latest(ctx(t), nil, "team-a", "db"); err != nil || db.Queue != nil {
		t.Errorf("unknown to the index: queue %+v, %v", db.Queue, err)
	}
	// With its namespace's rate of starts: the expected start, to the second.
	idx.at = map[string]ledger.Position{"team-a/" + release.SecretName("db", 1): {Position: 3, Total: 4, AcceptedAt: accepted,
		ExpectedStart: accepted.Add(200*time.Second + 300*time.Millisecond)}}
	db, err = s.Latest(ctx(t), nil, "team-a", "db")
	if err != nil || db.Queue == nil || db.Queue.ExpectedStart == nil || !db.Queue.ExpectedStart.Equal(accepted.Add(200*time.Second)) {
		t.Errorf("with a rate: queue %+v, %v", db.Queue, err)
	}
}
