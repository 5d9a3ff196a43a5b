package release

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
)

// A metadata list asks for pages of metaPage records (~1 KiB each: 10,000 take 20 requests),
// each answer read up to metaPageBytes: a tenant's Secret may carry ~1.5 MiB of metadata, so
// an answer over the cap is dropped there and asked again a tenth the size (down to one
// record); the next pages grow back twofold.
const (
	metaPage      = 500
	metaPageBytes = 8 << 20
)

var errPageTooLarge = errors.New("metadata page over its byte cap")

// metaPages calls each with every page of the metadata list of namespace's Secrets selector
// selects, as every such list is read; a fake clientset's (no REST client) in listPage pages.
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

// metaAccept asks for a page as protobuf (as client-go's metadata client does), JSON where
// the server has none: encoding/json was most of a 10,000-record list's CPU in submit.
const metaAccept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1," +
	"application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"

// protoMagic starts a Kubernetes protobuf answer (a runtime.Unknown around the list).
var protoMagic = []byte("k8s\x00")

// metaPageOf reads one page of metadata, at most metaPageBytes of it.
func metaPageOf(ctx context.Context, rc *rest.RESTClient, namespace string, opts metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	body, err := rc.Get().Namespace(namespace).Resource("secrets").VersionedParams(&opts, scheme.ParameterCodec).
		SetHeader("Accept", metaAccept).Stream(ctx)
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
	if raw, ok := bytes.CutPrefix(data, protoMagic); ok {
		var u runtime.Unknown
		if err = u.Unmarshal(raw); err == nil {
			err = list.Unmarshal(u.Raw)
		}
	} else {
		err = json.Unmarshal(data, &list)
	}
	if err != nil {
		return nil, fmt.Errorf("decode a metadata page: %w", err)
	}
	return &list, nil
}
