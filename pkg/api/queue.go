package api

import "time"

// QueueStateQueued is Queue.State while no executor has started the revision.
const QueueStateQueued = "queued"

// Queue is where a pending revision no executor has started stands in its namespace's queue
// (docs/design.md, "Tenants and shares"), beside Helm's fields in get and list; absent once started.
type Queue struct {
	// State is "queued".
	State string `json:"state"`
	// Position is 1 for its namespace's earliest queued revision (other tenants' are not ahead).
	Position int `json:"position"`
	// Total is the number of queued revisions of its namespace.
	Total int `json:"total"`
	// AcceptedAt is when the revision was accepted (in seconds), AgeSeconds its wait so far.
	AcceptedAt time.Time `json:"acceptedAt"`
	AgeSeconds int64     `json:"ageSeconds"`
	// ExpectedStart is when it should start at its namespace's recent rate (absent without one).
	ExpectedStart *time.Time `json:"expectedStart,omitempty"`
}
