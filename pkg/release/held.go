package release

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HeldSlot is a record admission counts as queued (CountsAsQueued) whose status label is
// not pending. No record async-helm or Helm writes is both: Helm's adoption and every
// failure drop the queued label in the write that makes the record final. So a namespace
// editor made it: a seal read once and written back onto a finished or re-made record (it
// holds a MAX_QUEUED slot and nothing would ever free it), or the status label of a waiting
// reservation flipped (genuine work, which runs when delivered). The sweeper reads only
// records labelled pending; it looks at these in a pass of their own.
type HeldSlot struct {
	Namespace, SecretName string
	// Created is the Secret's creationTimestamp: the API server's, not a label.
	Created time.Time
}

// selectorQueued selects the release secrets labelled queued; CountsAsQueued decides.
const selectorQueued = SelectorReleaseSecrets + "," + LabelQueued + "=true"

func heldSlot(key []byte, m metav1.Object) (HeldSlot, bool) {
	if !CountsAsQueued(key, m) || IsPending(m.GetLabels()[LabelStatus]) {
		return HeldSlot{}, false
	}
	return HeldSlot{Namespace: m.GetNamespace(), SecretName: m.GetName(), Created: m.GetCreationTimestamp().Time}, true
}

// HeldSlots lists the held slots in the index, without an API call.
func (x *RevisionIndex) HeldSlots() []HeldSlot {
	var out []HeldSlot
	for _, inf := range x.informers {
		objs, err := inf.GetIndexer().ByIndex(QueuedIndex, queuedAll)
		if err != nil {
			continue // the index is registered in NewRevisionIndexWith: never
		}
		for _, obj := range objs {
			if m, ok := obj.(metav1.Object); ok {
				if h, ok := heldSlot(x.queued.rule.sealKey, m); ok {
					out = append(out, h)
				}
			}
		}
	}
	return out
}

// HeldSlots lists the held slots of namespace from the API server (one LIST of the records
// labelled queued), as Store.SealKey verifies them.
func (s *Store) HeldSlots(ctx context.Context, namespace string) ([]HeldSlot, error) {
	list, err := s.Metadata.Resource(SecretsResource).Namespace(namespace).List(ctx, metav1.ListOptions{LabelSelector: selectorQueued})
	if err != nil {
		return nil, fmt.Errorf("list queued revisions of %q: %w", namespace, err)
	}
	var out []HeldSlot
	for i := range list.Items {
		if h, ok := heldSlot(s.SealKey, &list.Items[i]); ok {
			out = append(out, h)
		}
	}
	return out, nil
}
