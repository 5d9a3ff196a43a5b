package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/yaml"
)

type kube struct{ dyn dynamic.Interface }

func newKube(kubeconfig string) (*kube, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = 100, 200
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &kube{dyn: dyn}, nil
}

// kinds applied from the config files, in order; everything else there (RBAC, HPAs,
// webhook configurations) is left out: the processes run with the kubeconfig's rights and
// there is no webhook.
var applyOrder = []struct {
	kind       string
	gvr        schema.GroupVersionResource
	namespaced bool
}{
	{"Namespace", schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, false},
	{"CustomResourceDefinition", schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}, false},
	{"ServiceAccount", schema.GroupVersionResource{Version: "v1", Resource: "serviceaccounts"}, true},
	{"ConfigMap", schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, true},
	{"Service", schema.GroupVersionResource{Version: "v1", Resource: "services"}, true},
	// The controllers mark Brokers and channels Ready only when these exist and have
	// endpoints; kwok makes their pods Ready.
	{"Deployment", schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, true},
}

var crdGVR = applyOrder[1].gvr

// applyDir server-side applies the objects of every YAML file in dir and waits until the
// CRDs are established. It returns the number of objects applied.
func (k *kube) applyDir(ctx context.Context, dir string) (int, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return 0, fmt.Errorf("no YAML under %s (run make knative-tools): %v", dir, err)
	}
	byKind := map[string][]*unstructured.Unstructured{}
	for _, f := range files {
		objs, err := readObjects(f)
		if err != nil {
			return 0, err
		}
		for _, o := range objs {
			byKind[o.GetKind()] = append(byKind[o.GetKind()], o)
		}
	}
	n := 0
	for _, kind := range applyOrder {
		for _, o := range byKind[kind.kind] {
			if kind.kind == "CustomResourceDefinition" && noConversionWebhook(o) {
				if err := k.dropConversionWebhook(ctx, o.GetName()); err != nil {
					return n, err
				}
			}
			if err := k.apply(ctx, kind.gvr, kind.namespaced, o); err != nil {
				return n, err
			}
			n++
		}
		if kind.kind == "CustomResourceDefinition" {
			if err := k.waitEstablished(ctx, byKind[kind.kind], 30*time.Second); err != nil {
				return n, err
			}
		}
	}
	return n, nil
}

// noConversionWebhook: EventType and PingSource name the eventing webhook as their
// conversion webhook; there is none here, and the API server would fail every read of them.
// It reports whether it changed crd.
func noConversionWebhook(crd *unstructured.Unstructured) bool {
	if s, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "strategy"); s != "Webhook" {
		return false
	}
	_ = unstructured.SetNestedMap(crd.Object, map[string]interface{}{"strategy": "None"}, "spec", "conversion")
	return true
}

// dropConversionWebhook removes the webhook of an installed CRD with a merge patch: another
// field manager (config/knative's manifest test applies the upstream CRDs) may own the
// webhook fields, which an apply without them would then keep.
func (k *kube) dropConversionWebhook(ctx context.Context, name string) error {
	patch := []byte(`{"spec":{"conversion":{"strategy":"None","webhook":null}}}`)
	_, err := k.dyn.Resource(crdGVR).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("CRD %s: drop the conversion webhook: %w", name, err)
	}
	return nil
}

func (k *kube) apply(ctx context.Context, gvr schema.GroupVersionResource, namespaced bool, o *unstructured.Unstructured) error {
	b, err := o.MarshalJSON()
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = k.dyn.Resource(gvr)
	if namespaced {
		ri = k.dyn.Resource(gvr).Namespace(o.GetNamespace())
	}
	force := true
	_, err = ri.Patch(ctx, o.GetName(), types.ApplyPatchType, b, metav1.PatchOptions{FieldManager: "async-helm-knative", Force: &force})
	if err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
	}
	return nil
}

func (k *kube) waitEstablished(ctx context.Context, crds []*unstructured.Unstructured, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, c := range crds {
		for {
			got, err := k.dyn.Resource(crdGVR).Get(ctx, c.GetName(), metav1.GetOptions{})
			if err == nil && established(got) {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("CRD %s not established after %s (%v)", c.GetName(), timeout, err)
			}
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

func established(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]interface{})
		if m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

func readObjects(path string) ([]*unstructured.Unstructured, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	var objs []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var m map[string]interface{}
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

var subscriptionGVR = schema.GroupVersionResource{Group: "messaging.knative.dev", Version: "v1", Resource: "subscriptions"}

// deleteSubscriptionNamespaces deletes every namespace that holds a Subscription and waits
// until the Subscriptions are gone: their finalizers are removed by the running controllers.
func (k *kube) deleteSubscriptionNamespaces(ctx context.Context, timeout time.Duration) error {
	list, err := k.dyn.Resource(subscriptionGVR).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("list subscriptions: %w", err)
	}
	set := map[string]bool{}
	for _, s := range list.Items {
		set[s.GetNamespace()] = true
	}
	var nss []string
	for ns := range set {
		nss = append(nss, ns)
	}
	sort.Strings(nss)
	for _, ns := range nss {
		err := k.dyn.Resource(applyOrder[0].gvr).Delete(ctx, ns, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("delete namespace %s: %w", ns, err)
		}
	}
	if len(nss) > 0 {
		fmt.Printf("knative: deleting namespaces with Subscriptions before stopping the controllers: %v\n", nss)
	}
	deadline := time.Now().Add(timeout)
	for {
		list, err := k.dyn.Resource(subscriptionGVR).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("list subscriptions: %w", err)
		}
		if len(list.Items) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%d Subscriptions still there after %s", len(list.Items), timeout)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}
