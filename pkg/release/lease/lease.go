// Package lease holds async-helm's Leases beside the release records: the heartbeat Lease
// an executor holds while it runs one revision's action (Heartbeat, Held; its progress and
// cancel in annotations), and the tombstone an uninstall leaves until the notifier reports
// it (docs/design.md, "Exactly once" and "Uninstall and rollback").
package lease

import "encoding/json"

// Labels of async-helm's Leases. The request id, revision and chart labels are those of
// the release Secret the Lease belongs to (pkg/release uses these constants for both).
const (
	// LabelManagedBy=ManagedByUs marks the Leases of async-helm's revisions.
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedByUs    = "async-helm"
	// LabelRequestID is the request a Secret or Lease belongs to.
	LabelRequestID = "async-helm.io/request-id"
	// LabelRevision is the revision a Secret or Lease belongs to (on a release Secret it
	// also marks the revision as async-helm's own: see pkg/release).
	LabelRevision = "async-helm.io/revision"
	// LabelChart is "<chart>-<version>", so watchers see the chart without decoding payloads.
	LabelChart = "async-helm.io/chart"
)

// SelectorLeases selects the heartbeat Leases of async-helm's revisions.
const SelectorLeases = LabelManagedBy + "=" + ManagedByUs

// annotationPatch is a JSON merge patch setting one annotation (of a Lease): marshalled,
// so any value (a user name with any character) stays valid JSON.
func annotationPatch(key, value string) []byte {
	return annotationsPatch(map[string]string{key: value})
}

func annotationsPatch(ann map[string]string) []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": ann}})
	return b
}
