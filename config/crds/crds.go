// Package crds holds the CustomResourceDefinitions async-helm reads but does not own: the
// OpenShift console's chart repositories (helm.openshift.io/v1beta1 HelmChartRepository and
// ProjectHelmChartRepository). OpenShift serves them already; the local cluster and the
// tests install them from here.
package crds

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"io/fs"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/internal/knativeapply"
)

//go:embed *.yaml
var files embed.FS

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// Objects are the CRDs of this directory.
func Objects() ([]*unstructured.Unstructured, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, n := range names {
		raw, err := files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		objs, err := knativeapply.Decode(bytes.NewReader(raw))
		if err != nil {
			return nil, fmt.Errorf("%s: %w", n, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}

// Install applies the CRDs server-side (idempotent: an unchanged CRD is left as it is) and
// waits until the API server serves them.
func Install(ctx context.Context, cfg *rest.Config) error {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	objs, err := Objects()
	if err != nil {
		return err
	}
	ri := dc.Resource(crdGVR)
	for _, o := range objs {
		if err := knativeapply.ApplyTo(ctx, ri, o, "async-helm", false); err != nil {
			return fmt.Errorf("apply CRD %s: %w", o.GetName(), err)
		}
	}
	for _, o := range objs {
		if err := knativeapply.WaitEstablished(ctx, ri, o.GetName()); err != nil {
			return err
		}
	}
	return nil
}
