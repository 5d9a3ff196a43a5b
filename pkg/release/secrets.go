package release

import (
	"context"
	"fmt"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ListHead is a release Secret as a list with limitInfo reads it: its kept metadata and its
// payload's list head, or why it did not decode. A page's payloads (the tenant's, up to
// 1 MiB each) are held only while they are decoded.
type ListHead struct {
	metav1.ObjectMeta
	Release *helmrelease.Release
	Err     error
}

// listHeadOf is sec's ListHead.
func listHeadOf(sec *corev1.Secret) ListHead {
	rls, err := decodeListHead(sec.Data["release"], sec.Namespace)
	return ListHead{ObjectMeta: keptMeta(sec.ObjectMeta), Release: rls, Err: err}
}

// ReleaseHeads lists the release secrets of namespace ("" = all) as the store's own
// identity (callers check access first), in pages, keeping each one's ListHead.
func (s *Store) ReleaseHeads(ctx context.Context, namespace string) ([]ListHead, error) {
	var out []ListHead
	err := eachPage(SelectorReleaseSecrets, func(opts metav1.ListOptions) (string, error) {
		list, err := s.Client.CoreV1().Secrets(namespace).List(ctx, opts)
		if err != nil {
			return "", err
		}
		for i := range list.Items {
			out = append(out, listHeadOf(&list.Items[i]))
			list.Items[i].Data = nil // the page's payloads go as soon as each is decoded
		}
		return list.Continue, nil
	})
	if err != nil {
		return nil, fmt.Errorf("list release secrets of %q: %w", namespace, err)
	}
	return out, nil
}

// listPage is how many release Secrets one request of a list reads: each is the tenant's
// and may be near etcd's 1.5 MiB, held twice (the answer and its decode) in every list.
const listPage = 50

// eachPage calls list with selector and a page's options until list answers no continue
// token. The pages are one consistent list, as a single read is.
func eachPage(selector string, list func(metav1.ListOptions) (string, error)) error {
	opts := metav1.ListOptions{LabelSelector: selector, Limit: listPage}
	for {
		next, err := list(opts)
		if err != nil || next == "" {
			return err
		}
		opts.Continue = next
	}
}

// ReleaseHead reads one release secret's ListHead as the store's own identity (nil when
// it is gone).
func (s *Store) ReleaseHead(ctx context.Context, namespace, name string) (*ListHead, error) {
	sec, err := s.Client.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read release secret %s/%s: %w", namespace, name, err)
	}
	h := listHeadOf(sec)
	return &h, nil
}

// ReleaseMetas lists the metadata (keptMeta) of the release secrets of namespace ("" =
// all) from the API server, in pages (metaPages): a list that must see what was just written.
func (s *Store) ReleaseMetas(ctx context.Context, namespace string) ([]*metav1.PartialObjectMetadata, error) {
	var out []*metav1.PartialObjectMetadata
	err := s.metaPages(ctx, namespace, SelectorReleaseSecrets, func(list *metav1.PartialObjectMetadataList) {
		for i := range list.Items {
			out = append(out, &metav1.PartialObjectMetadata{TypeMeta: list.Items[i].TypeMeta, ObjectMeta: keptMeta(list.Items[i].ObjectMeta)})
		}
	})
	if err != nil {
		return nil, fmt.Errorf("list release secrets of %q: %w", namespace, err)
	}
	return out, nil
}

// Head reads one record at resourceVersion (from the API server's watch cache, not a quorum
// read) and decodes only its head: nil when the Secret is gone, ErrUndecodable when its
// payload does not decode.
func (s *Store) Head(ctx context.Context, namespace, secretName, resourceVersion string) (*Head, error) {
	sec, err := s.Client.CoreV1().Secrets(namespace).Get(ctx, secretName, metav1.GetOptions{ResourceVersion: resourceVersion})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read release record %s/%s: %w", namespace, secretName, err)
	}
	h, err := decodeHead(sec.Data["release"], namespace)
	if err != nil {
		return nil, fmt.Errorf("%s/%s: %w", namespace, secretName, err)
	}
	return &h, nil
}
