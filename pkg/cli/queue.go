package cli

import (
	"fmt"
	"time"

	"github.com/async-helm/async-helm/pkg/api"
)

// The position is in the namespace's own queue (docs/design.md, "Tenants and shares"):
// other tenants' work is not ahead of it; it goes down as the namespace's revisions
// accepted before this one start.

// queueWords is a queued revision in status: "position 312 of 1200, waiting 2m10s for an
// executor", then ", expected to start at <UTC time>" when the service has an estimate.
func queueWords(q *api.Queue) string {
	return fmt.Sprintf("position %d of %d, waiting %s for an executor", q.Position, q.Total, queueAge(q)) + expectedStart(q, ", expected to start at ")
}

// queueShort is a queued revision in a list row or a followed line: "queued 312/1200, 2m10s",
// then ", start ~<UTC time>" when the service has an estimate.
func queueShort(q *api.Queue) string {
	return fmt.Sprintf("queued %d/%d, %s", q.Position, q.Total, queueAge(q)) + expectedStart(q, ", start ~")
}

// expectedStart is prefix and the queue's expected start in UTC (RFC 3339), or "" without one.
func expectedStart(q *api.Queue, prefix string) string {
	if q.ExpectedStart == nil {
		return ""
	}
	return prefix + q.ExpectedStart.UTC().Format(time.RFC3339)
}

func queueAge(q *api.Queue) time.Duration { return time.Duration(max(q.AgeSeconds, 0)) * time.Second }
