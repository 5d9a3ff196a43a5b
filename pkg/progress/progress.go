// Package progress is what a pending revision is doing while Helm runs: the phase (read
// from Helm's own log), the release's workloads ready against total, what it waits for, the
// hook running now and the latest Warning events. The executor records it on the
// revision's Lease (docs/design.md, "Progress and cancel"); readers show it.
package progress

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"
)

// Phases of an action, in order.
const (
	PhaseFetching  = "fetching chart"
	PhasePreHooks  = "pre hooks"
	PhaseApplying  = "applying"
	PhaseWaiting   = "waiting"
	PhasePostHooks = "post hooks"
)

// Progress is the shape shared by the HTTP API (`progress` beside Helm's release fields),
// the progress event and the Lease annotation.
type Progress struct {
	Phase      string    `json:"phase"`
	Ready      int       `json:"ready"`
	Total      int       `json:"total"`
	WaitingFor []string  `json:"waitingFor,omitempty"`
	Hook       string    `json:"hook,omitempty"`
	Warnings   []string  `json:"warnings,omitempty"`
	Updated    time.Time `json:"updated"`
	// Attempt is which attempt of its request the revision is ("2 of 4") when the request
	// asked for retries (docs/design.md, "Retries and remediation").
	Attempt string `json:"attempt,omitempty"`
}

// Same reports whether p and q say the same thing (Updated aside).
func (p Progress) Same(q Progress) bool {
	p.Updated, q.Updated = time.Time{}, time.Time{}
	a, _ := json.Marshal(p)
	b, _ := json.Marshal(q)
	return string(a) == string(b)
}

// String is one line for logs and plain terminals.
func (p Progress) String() string {
	s := fmt.Sprintf("%s, %d/%d ready", p.Phase, p.Ready, p.Total)
	if p.Attempt != "" {
		s = "attempt " + p.Attempt + ", " + s
	}
	if p.Hook != "" {
		s += ", hook " + p.Hook
	}
	if len(p.WaitingFor) > 0 {
		s += ", waiting for " + strings.Join(p.WaitingFor, ", ")
	}
	return s
}

// Encode is the annotation value; Decode reads it back (nil for "").
func (p Progress) Encode() string {
	b, _ := json.Marshal(p)
	return string(b)
}

// Decode reads an annotation value; nil when there is none.
func Decode(s string) (*Progress, error) {
	if s == "" {
		return nil, nil
	}
	var p Progress
	if err := json.Unmarshal([]byte(s), &p); err != nil {
		return nil, fmt.Errorf("decode progress: %w", err)
	}
	return &p, nil
}

// Lines the executor's Helm kube client (pkg/helmexec) logs before each create, where Helm's
// own "creating %d resource(s)" is the same for a hook and for the release's resources.
const (
	LogCreateHook    = "async-helm: creating %d hook resource(s)"
	LogCreateRelease = "async-helm: creating %d release resource(s)"
)

// Phases follows Helm's debug log to tell the phase and the running hook. It matches on
// Helm's format strings (stable across its releases), not on the formatted text, and on
// LogCreateHook/LogCreateRelease, which both engines' kube clients log before each create.
type Phases struct {
	mu    sync.Mutex
	phase string
	hook  string
	// applied: the release's own resources are created or updated.
	applied bool
	// Next receives every log line too (the executor's log buffer).
	Next func(format string, args ...any)
}

// NewPhases starts in PhaseFetching.
func NewPhases(next func(string, ...any)) *Phases {
	return &Phases{phase: PhaseFetching, Next: next}
}

func (t *Phases) hookPhase() string {
	if t.applied {
		return PhasePostHooks
	}
	return PhasePreHooks
}

// Log is a Helm DebugLog.
func (t *Phases) Log(format string, args ...any) {
	t.mu.Lock()
	switch {
	case format == LogCreateHook:
		t.phase, t.hook = t.hookPhase(), ""
	case format == LogCreateRelease:
		t.phase, t.hook, t.applied = PhaseApplying, "", true
	case strings.HasPrefix(format, "Watching for changes to ") && len(args) >= 2:
		// Helm watches a hook (a Job or Pod) until it completes.
		t.hook, t.phase = fmt.Sprintf("%v/%v", args[0], args[1]), t.hookPhase()
	case strings.HasPrefix(format, "checking %d resources for changes"):
		t.phase, t.hook, t.applied = PhaseApplying, "", true
	case strings.HasPrefix(format, "beginning wait for %d resources with timeout"):
		t.phase, t.hook, t.applied = PhaseWaiting, "", true
	case strings.HasPrefix(format, "wait for resources succeeded"):
		t.phase, t.applied = PhasePostHooks, true
	}
	next := t.Next
	t.mu.Unlock()
	if next != nil {
		next(format, args...)
	}
}

// Current is the phase and the hook running now.
func (t *Phases) Current() (phase, hook string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.phase, t.hook
}
