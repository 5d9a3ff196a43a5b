package release

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// StoredRequest is what the sweeper needs of a pending revision's Secret before it sends the
// work again: its labels and UID as read now, the stored event, whether the record decodes.
// Nothing in it is trusted: the sweeper checks the event against the rest.
type StoredRequest struct {
	Revision Revision
	// Event is the stored accepted event (nil when there is none or the revision is final).
	Event []byte
	// Undecodable is why the record's payload does not decode (nil when it does).
	Undecodable error
}

// StoredRequest reads one pending revision's Secret (ErrNotFound when gone).
func (s *Store) StoredRequest(ctx context.Context, namespace, secretName string) (*StoredRequest, error) {
	sec, err := s.Client.CoreV1().Secrets(namespace).Get(ctx, secretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %s/%s", ErrNotFound, namespace, secretName)
	}
	if err != nil {
		return nil, fmt.Errorf("read stored request of %s/%s: %w", namespace, secretName, err)
	}
	rev, ok := RevisionFromMeta(sec)
	if !ok {
		return nil, fmt.Errorf("%w: %s/%s is not a release record", ErrNotFound, namespace, secretName)
	}
	out := &StoredRequest{Revision: rev}
	if IsPending(rev.Status) {
		out.Event = sec.Data[DataEvent]
	}
	if _, err := decodeHead(sec.Data["release"], namespace); err != nil {
		out.Undecodable = err
	}
	return out, nil
}

// KeptRequest is what a release Secret holds that can name its request, whatever its labels
// say: UID, labels (request id, seal) and the stored event. Nothing in it is trusted: a cancel
// checks the seal and the event's signature before it binds a request named there.
type KeptRequest struct {
	UID    types.UID
	Labels map[string]string
	// Event is data[DataEvent] (nil when there is none), whatever the status label says.
	Event []byte
}

// KeptRequest reads the Secret namespace/secretName (nil, nil when it is gone).
func (s *Store) KeptRequest(ctx context.Context, namespace, secretName string) (*KeptRequest, error) {
	sec, err := s.Client.CoreV1().Secrets(namespace).Get(ctx, secretName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the request kept in %s/%s: %w", namespace, secretName, err)
	}
	return &KeptRequest{UID: sec.UID, Labels: sec.Labels, Event: sec.Data[DataEvent]}, nil
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
