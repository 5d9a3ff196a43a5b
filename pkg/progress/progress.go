// Package progress is what a pending revision is doing while Helm runs, as the executor
// records it on the revision's Lease (docs/design.md, "Progress and cancel").
package progress

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/cli-runtime/pkg/resource"
)

// Phases of an action, in order.
const (
	PhaseFetching  = "fetching chart"
	PhasePreHooks  = "pre hooks"
	PhaseApplying  = "applying"
	PhaseWaiting   = "waiting"
	PhasePostHooks = "post hooks"
)

// Progress is the shape shared by the HTTP API, the progress event and the Lease annotation.
type Progress struct {
	Phase      string    `json:"phase"`
	Ready      int       `json:"ready"`
	Total      int       `json:"total"`
	WaitingFor []string  `json:"waitingFor,omitempty"`
	Hook       string    `json:"hook,omitempty"`
	Warnings   []string  `json:"warnings,omitempty"`
	Updated    time.Time `json:"updated"`
	// Attempt is which attempt of a request with retries the revision is ("2 of 4").
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

// Encode is the annotation value.
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

// Lines the executor's kube client logs before each create or update (Helm's own is the same
// for hooks and the release), the release's naming its workloads for the Collector.
const (
	LogCreateHook    = "async-helm: creating %d hook resource(s)"
	LogCreateRelease = "async-helm: creating %d release resource(s)%s"
	LogUpdateRelease = "async-helm: updating %d release resource(s)%s"
	// MaxWorkloads is how many of a release's workloads are named, and read each progress tick.
	MaxWorkloads    = 64
	workloadsPrefix = "; workloads: "
)

// Workloads is what LogCreateRelease and LogUpdateRelease name: "" or "; workloads: Kind/name ...".
type Workloads string

// WorkloadsOf names the Deployments, StatefulSets, DaemonSets and Jobs among objs (MaxWorkloads).
func WorkloadsOf(objs []*resource.Info) Workloads {
	var names []string
	for _, o := range objs {
		if o == nil || o.Mapping == nil || len(names) == MaxWorkloads || len(validation.IsDNS1123Subdomain(o.Name)) > 0 {
			continue
		}
		switch gvk := o.Mapping.GroupVersionKind; gvk.Group + "/" + gvk.Kind {
		case "apps/Deployment", "apps/StatefulSet", "apps/DaemonSet", "batch/Job":
			names = append(names, gvk.Kind+"/"+o.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	return Workloads(workloadsPrefix + strings.Join(names, " "))
}

// Phases follows Helm's debug log to tell the phase and the running hook, matching Helm's
// format strings (stable across its releases) and LogCreateHook/LogCreateRelease.
type Phases struct {
	mu    sync.Mutex
	phase string
	hook  string
	// applied: the release's own resources are created or updated.
	applied bool
	// workloads: what the latest create or update of them named.
	workloads []string
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
	case format == LogCreateRelease || format == LogUpdateRelease:
		t.phase, t.hook, t.applied = PhaseApplying, "", true
		if len(args) > 1 {
			w, _ := args[1].(Workloads)
			t.workloads = strings.Fields(strings.TrimPrefix(string(w), workloadsPrefix))
		}
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

// Workloads are the workloads ("Kind/name") the kube client last created or updated.
func (t *Phases) Workloads() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.workloads
}
