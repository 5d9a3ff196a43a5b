package release

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// A metadata list asks for pages of metaPage records, each answer read up to metaPageBytes:
// a Helm record's metadata is about 1 KiB, so 10,000 releases take 20 requests, not 200
// (make bench: 1,520 ms p50 in pages of 50). A tenant's Secret may carry ~1.5 MiB of
// metadata: an answer over the cap is dropped once read that far, and the same page asked
// again a tenth the size (down to one record); the next pages grow back twofold.
const (
	metaPage      = 500
	metaPageBytes = 8 << 20
)

var errPageTooLarge = errors.New("metadata page over its byte cap")

// metaPages calls each with every page of the metadata list of namespace's Secrets that
// selector selects: every metadata list of a tenant's Secrets is read through it. Without a
// REST client to read the answer from (a fake clientset), pages are of listPage.
func (s *Store) metaPages(ctx context.Context, namespace, selector string, each func(*metav1.PartialObjectMetadataList)) error {
	var rc *rest.RESTClient
	if s.Client != nil {
		rc, _ = s.Client.CoreV1().RESTClient().(*rest.RESTClient)
	}
	capped := rc != nil
	opts := metav1.ListOptions{LabelSelector: selector, Limit: listPage}
	if capped {
		opts.Limit = metaPage
	}
	for {
		var list *metav1.PartialObjectMetadataList
		var err error
		if capped {
			list, err = metaPageOf(ctx, rc, namespace, opts)
		} else {
			list, err = s.Metadata.Resource(SecretsResource).Namespace(namespace).List(ctx, opts)
		}
		if errors.Is(err, errPageTooLarge) && opts.Limit > 1 {
			opts.Limit = max(1, opts.Limit/10)
			continue
		}
		if err != nil {
			return err
		}
		each(list)
		if list.Continue == "" {
			return nil
		}
		opts.Continue = list.Continue
		if capped {
			opts.Limit = min(metaPage, 2*opts.Limit)
		}
	}
}

// metaPageOf reads one page of metadata as JSON, at most metaPageBytes of it.
func metaPageOf(ctx context.Context, rc *rest.RESTClient, namespace string, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	body, err := rc.Get().Namespace(namespace).Resource("secrets").VersionedParams(&opts, scheme.ParameterCodec).
		SetHeader("Accept", "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1").Stream(ctx)
	if err != nil {
		return nil, err
	}
	defer func() { _ = body.Close() }()
	data, err := io.ReadAll(io.LimitReader(body, metaPageBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read a metadata page: %w", err)
	}
	if len(data) > metaPageBytes {
		return nil, fmt.Errorf("%w: %d records", errPageTooLarge, opts.Limit)
	}
	var list metav1.PartialObjectMetadataList
	if err := json.Unmarshal(data, &list); err != nil {
		return nil, fmt.Errorf("decode a metadata page: %w", err)
	}
	return &list, nil
}
