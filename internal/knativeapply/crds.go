package knativeapply

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/config/crds"
)

// crdObjects are the chart repository CRDs of config/crds.
func crdObjects() ([]*unstructured.Unstructured, error) {
	names, err := fs.Glob(crds.Files, "*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, n := range names {
		raw, err := crds.Files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		objs, err := Decode(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// InstallRepositoryCRDs applies config/crds server-side (idempotent: an unchanged CRD is left as it
// is) and waits until the API server serves them.
func InstallRepositoryCRDs(ctx context.Context, cfg *rest.Config) error {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	objs, err := crdObjects()
	if err != nil {
		return err
	}
	ri := dc.Resource(crdGVR)
	for _, o := range objs {
		if err := ApplyTo(ctx, ri, o, "async-helm", false); err != nil {
			return fmt.Errorf("apply CRD %s: %w", o.GetName(), err)
		}
	}
	for _, o := range objs {
		if err := WaitEstablished(ctx, ri, o.GetName()); err != nil {
			return err
		}
	}
	return nil
}
