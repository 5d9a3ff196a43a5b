package release

import (
	"encoding/json"
	"fmt"

	"helm.sh/helm/v3/pkg/chart"

	"github.com/async-helm/async-helm/pkg/valuesfrom"
)

// AnnotationValuesFrom is the chart annotation of a release's record that keeps its
// values_from references (JSON; never values), so an upgrade reusing values reads them again.
// Helm stores the chart with the release: the references live and go with the revision.
const AnnotationValuesFrom = "async-helm.io/values-from"

// maxValuesFromAnnotation bounds what is decoded of a record tenants can write.
const maxValuesFromAnnotation = 16 << 10

// RecordValuesFrom writes refs into the annotations of a chart the caller owns (not a shared
// one), or removes the annotation when there are none.
func RecordValuesFrom(ch *chart.Chart, refs []valuesfrom.Ref) error {
	if ch == nil {
		return nil
	}
	if len(refs) == 0 {
		if ch.Metadata != nil {
			delete(ch.Metadata.Annotations, AnnotationValuesFrom)
		}
		return nil
	}
	kept := make([]valuesfrom.Ref, len(refs))
	for i, r := range refs {
		kept[i] = valuesfrom.Ref{Kind: r.Kind, Name: r.Name, Key: r.KeyOrDefault()}
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return fmt.Errorf("record values_from: %w", err)
	}
	if ch.Metadata == nil {
		ch.Metadata = &chart.Metadata{}
	}
	if ch.Metadata.Annotations == nil {
		ch.Metadata.Annotations = map[string]string{}
	}
	ch.Metadata.Annotations[AnnotationValuesFrom] = string(b)
	return nil
}

// RecordedValuesFrom are the references a stored release's chart recorded (none without
// the annotation). The record is the tenant's: it is bounded and validated as a request's
// references are, and read in the release's namespace only.
func RecordedValuesFrom(ch *chart.Chart, namespace string) ([]valuesfrom.Ref, error) {
	if ch == nil || ch.Metadata == nil || ch.Metadata.Annotations[AnnotationValuesFrom] == "" {
		return nil, nil
	}
	raw := ch.Metadata.Annotations[AnnotationValuesFrom]
	if len(raw) > maxValuesFromAnnotation {
		return nil, fmt.Errorf("%w: the recorded %s is %d bytes, at most %d", valuesfrom.ErrInvalid, AnnotationValuesFrom, len(raw), maxValuesFromAnnotation)
	}
	var refs []valuesfrom.Ref
	if err := json.Unmarshal([]byte(raw), &refs); err != nil {
		return nil, fmt.Errorf("%w: the recorded %s: %v", valuesfrom.ErrInvalid, AnnotationValuesFrom, err)
	}
	if err := valuesfrom.Validate(refs, namespace); err != nil {
		return nil, fmt.Errorf("the recorded %s: %w", AnnotationValuesFrom, err)
	}
	return refs, nil
}
