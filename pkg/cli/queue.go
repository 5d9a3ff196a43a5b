package cli

import (
	"fmt"
	"time"

	"github.com/async-helm/async-helm/pkg/api"
)

// The position counts every namespace of the service (docs/design.md, "Queue visibility"):
// it goes down as revisions accepted before this one start.

// queueWords is a queued revision in status: "position 312 of 1200, waiting 2m10s for an
// executor".
func queueWords(q *api.Queue) string {
	return fmt.Sprintf("position %d of %d, waiting %s for an executor", q.Position, q.Total, queueAge(q))
}

// queueShort is a queued revision in a list row or a followed line: "queued 312/1200, 2m10s".
func queueShort(q *api.Queue) string {
	return fmt.Sprintf("queued %d/%d, %s", q.Position, q.Total, queueAge(q))
}

func queueAge(q *api.Queue) time.Duration { return time.Duration(max(q.AgeSeconds, 0)) * time.Second }
