package release

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
)

// HeldSlot is a record admission counts as queued (CountsAsQueued) whose labels are not a
// pending revision of ours (Revision.Ours): a final status label, or a relabelled one
// (another version, a hand-run helm uninstall's mark). The sweeper takes only pending
// revisions of ours to their end. No record async-helm or Helm writes is both, at any
// resourceVersion: Helm's adoption and every failure drop the queued label in the write
// that makes the status label final. So a namespace editor made it: a seal read once and
// written back onto a finished or re-made record (it would hold a MAX_QUEUED slot for
// ever), or the status label of its own waiting reservation flipped. The sweeper reads
// only records labelled pending; it frees these in a pass of their own (UnqueueHeld).
type HeldSlot struct {
	Namespace, SecretName string
	// ResourceVersion is the one the slot was seen at: UnqueueHeld writes only that one.
	ResourceVersion string
}

// selectorQueued selects the release secrets labelled queued; CountsAsQueued decides.
const selectorQueued = SelectorReleaseSecrets + "," + LabelQueued + "=true"

// heldSlot: a record that counts as queued and that the sweeper will not take to its end
// (its labels say final, or not a pending revision of ours: relabelled, or a hand-run
// helm uninstall's mark on a reservation) would hold its slot for ever.
func heldSlot(key []byte, m metav1.Object) (HeldSlot, bool) {
	if !CountsAsQueued(key, m) {
		return HeldSlot{}, false
	}
	if rev, ok := RevisionFromMeta(m); ok && rev.Ours && IsPending(rev.Status) {
		return HeldSlot{}, false // the sweeper's: sent again, or failed at QUEUE_DEADLINE
	}
	return HeldSlot{Namespace: m.GetNamespace(), SecretName: m.GetName(), ResourceVersion: m.GetResourceVersion()}, true
}

// UnqueueHeld drops the queued label of a held slot, in its labels only, at the
// resourceVersion it was decided on; it reports whether it did. A Secret changed since is
// read again and decided on as it is now, up to retry.DefaultRetry's tries: leaving it to
// the next pass let a tenant who rewrites its record faster than the index's lag keep the
// slot for ever, every pass losing the same race. Nothing is decoded: the payload is the
// tenant's (missing, undecodable, final or pending) and the labels alone make the slot. A
// waiting reservation that loses its label this way is failed unrun by the first executor
// that gets its event, as any reservation relabelled out of the count is.
func (s *Store) UnqueueHeld(ctx context.Context, h HeldSlot) (bool, error) {
	var dropped bool
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		ok, err := s.dropQueued(ctx, h.Namespace, h.SecretName, h.ResourceVersion, "drop the queued label of a held slot")
		if err != nil || ok {
			dropped = ok
			return err
		}
		now, held, err := s.heldSlotNow(ctx, h.Namespace, h.SecretName)
		if err != nil || !held {
			return err // gone, or no longer a held slot (the sweeper's, or not counted)
		}
		h = now
		return apierrors.NewConflict(SecretsResource.GroupResource(), h.SecretName, errors.New("changed since it was seen"))
	})
	if err != nil {
		return false, fmt.Errorf("free held slot %s/%s: %w", h.Namespace, h.SecretName, err)
	}
	return dropped, nil
}

// heldSlotNow reads a Secret's metadata from the API server and says whether it is a held
// slot now (false when gone), at the resourceVersion read.
func (s *Store) heldSlotNow(ctx context.Context, namespace, name string) (HeldSlot, bool, error) {
	m, err := s.SecretMeta(ctx, namespace, name)
	if err != nil || m == nil {
		return HeldSlot{}, false, err
	}
	h, held := heldSlot(s.SealKey, m)
	return h, held, nil
}

// SecretMeta reads the metadata of a release Secret from the API server, through the
// metadata client when the Store has one (no payload); nil, nil when it is gone.
func (s *Store) SecretMeta(ctx context.Context, namespace, secretName string) (metav1.Object, error) {
	var m metav1.Object
	var err error
	if s.Metadata != nil {
		m, err = s.Metadata.Resource(SecretsResource).Namespace(namespace).Get(ctx, secretName, metav1.GetOptions{})
	} else {
		m, err = s.Client.CoreV1().Secrets(namespace).Get(ctx, secretName, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the metadata of %s/%s: %w", namespace, secretName, err)
	}
	return m, nil
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
