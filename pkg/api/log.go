package api

import "time"

// PathLog is GET ?ns=&name=[&version=][&after=]: the log of a release's action (design.md).
const PathLog = "/api/helm/release/log"

// ActionLog is what Helm logged while the executor ran one revision's action.
type ActionLog struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Revision  int    `json:"revision"`
	RequestID string `json:"requestId,omitempty"`
	Action    string `json:"action,omitempty"`
	// Running: the executor still writes this log (false once ended, or gone stale).
	Running bool      `json:"running"`
	Started time.Time `json:"started"`
	Updated time.Time `json:"updated"`
	// Dropped is how many lines the bounded buffer let go, oldest first.
	Dropped int64     `json:"dropped,omitempty"`
	Lines   []LogLine `json:"lines"`
}

// LogLine is a line of Helm's log; a run of repeats is kept once (Repeated more, the last at Last).
type LogLine struct {
	Seq      int64      `json:"seq"`
	Time     time.Time  `json:"time"`
	Text     string     `json:"text"`
	Repeated int        `json:"repeated,omitempty"`
	Last     *time.Time `json:"last,omitempty"`
}
