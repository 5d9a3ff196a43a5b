package api

import "time"

// QueueStateQueued is Queue.State while no executor has started the revision.
const QueueStateQueued = "queued"

// Queue is where a pending revision no executor has started yet stands in the service's
// queue (docs/design.md, "Queue visibility"): `queue` beside Helm's fields in get and list
// answers, absent once an executor started it (or when the service does not know).
type Queue struct {
	// State is "queued".
	State string `json:"state"`
	// Position is 1 for the revision accepted first of every queued one of the service (all
	// namespaces): it goes down as revisions accepted before it start.
	Position int `json:"position"`
	// Total is the number of queued revisions of the service.
	Total int `json:"total"`
	// AcceptedAt is when the revision was accepted (second resolution); AgeSeconds is how
	// long it has waited when the answer was made.
	AcceptedAt time.Time `json:"acceptedAt"`
	AgeSeconds int64     `json:"ageSeconds"`
}
