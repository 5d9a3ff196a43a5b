// Package knative holds the manifests that deploy async-helm on Knative; its tests check
// them against Knative's Go types and the local cluster.
package knative

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"
	eventingv1 "knative.dev/eventing/pkg/apis/eventing/v1"
	"knative.dev/eventing/pkg/apis/feature"
	sourcesv1 "knative.dev/eventing/pkg/apis/sources/v1"
	"knative.dev/pkg/apis"
	servingconfig "knative.dev/serving/pkg/apis/config"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"
	"sigs.k8s.io/yaml"

	"github.com/async-helm/async-helm/internal/testcluster"
)

var cluster *testcluster.Env

func TestMain(m *testing.M) {
	cluster = testcluster.MustStart()
	os.Exit(m.Run())
}

// manifests reads every YAML document of this directory (the optional ones included).
func manifests(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	files, _ := filepath.Glob("*.yaml")
	opt, _ := filepath.Glob("*.yaml.optional")
	var out []*unstructured.Unstructured
	for _, f := range append(files, opt...) {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var raw json.RawMessage
			if err := d.Decode(&raw); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
				continue
			}
			var u unstructured.Unstructured
			if err := u.UnmarshalJSON(raw); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, &u)
		}
	}
	return out
}

type validatable interface {
	apis.Validatable
	apis.Defaultable
}

// The executor's timeoutSeconds (3600) is above Knative's default max-revision-timeout-seconds
// (600): the cluster must raise it, as README says. The test validates with that setting.
func servingContext(t *testing.T) context.Context {
	d, err := servingconfig.NewDefaultsConfigFromMap(map[string]string{"max-revision-timeout-seconds": "3600"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := servingconfig.ToContext(context.Background(), &servingconfig.Config{Defaults: d})
	// The executor's Triggers set delivery.timeout (an action may take the better part of an
	// hour): eventing's delivery-timeout feature must be enabled, as README says.
	ctx = feature.ToContext(ctx, feature.Flags{feature.DeliveryTimeout: feature.Enabled})
	return apis.WithinCreate(ctx)
}

func TestManifestsValidateAsKnativeTypes(t *testing.T) {
	ctx := servingContext(t)
	kinds := map[string]int{}
	for _, u := range manifests(t) {
		var obj validatable
		switch u.GetKind() {
		case "Service":
			obj = &servingv1.Service{}
		case "Broker":
			obj = &eventingv1.Broker{}
		case "Trigger":
			obj = &eventingv1.Trigger{}
		case "SinkBinding":
			obj = &sourcesv1.SinkBinding{}
		case "ApiServerSource":
			obj = &sourcesv1.ApiServerSource{}
		default:
			continue
		}
		kinds[u.GetKind()]++
		raw, _ := json.Marshal(u.Object)
		if err := json.Unmarshal(raw, obj); err != nil {
			t.Errorf("%s %s: decode: %v", u.GetKind(), u.GetName(), err)
			continue
		}
		obj.SetDefaults(ctx)
		if err := obj.Validate(ctx); err != nil {
			t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	for _, k := range []string{"Service", "Broker", "Trigger", "SinkBinding", "ApiServerSource"} {
		if kinds[k] == 0 {
			t.Errorf("no %s among the manifests", k)
		}
	}
	if kinds["Service"] != 3 {
		t.Errorf("%d Knative Services, want submit, executor, notifier", kinds["Service"])
	}
}

func TestExecutorTimeoutsMatchItsOwnDeadline(t *testing.T) {
	for _, u := range manifests(t) {
		if u.GetKind() != "Service" || u.GetName() != "executor" {
			continue
		}
		timeout, _, _ := unstructured.NestedInt64(u.Object, "spec", "template", "spec", "timeoutSeconds")
		start, _, _ := unstructured.NestedInt64(u.Object, "spec", "template", "spec", "responseStartTimeoutSeconds")
		cc, _, _ := unstructured.NestedInt64(u.Object, "spec", "template", "spec", "containerConcurrency")
		if timeout != 3600 || start != timeout {
			t.Errorf("timeoutSeconds %d, responseStartTimeoutSeconds %d: the response starts only when Helm ends", timeout, start)
		}
		if cc != 4 {
			t.Errorf("containerConcurrency %d, want MAX_PARALLEL (4)", cc)
		}
		return
	}
	t.Fatal("no executor Service")
}

// knativeCRDs reads the CRDs shipped inside the knative.dev module zips.
func knativeCRDs(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for mod, dir := range map[string]string{"knative.dev/serving": "config/core/300-resources", "knative.dev/eventing": "config/core/resources"} {
		b, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod).Output()
		if err != nil {
			t.Fatalf("go list %s: %v", mod, err)
		}
		files, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(b)), dir, "*.yaml"))
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var u unstructured.Unstructured
			if err := yaml.Unmarshal(raw, &u.Object); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if u.GetKind() == "CustomResourceDefinition" {
				out = append(out, &u)
			}
		}
	}
	return out
}

func TestManifestsPassServerSideDryRunWithKnativeCRDs(t *testing.T) {
	ctx := context.Background()
	dc, err := dynamic.NewForConfig(cluster.Admin)
	if err != nil {
		t.Fatal(err)
	}
	crdGVR := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	crds := knativeCRDs(t)
	if len(crds) < 8 {
		t.Fatalf("found %d Knative CRDs in the module zips", len(crds))
	}
	for _, crd := range crds {
		if err := apply(ctx, dc.Resource(crdGVR), crd, false); err != nil {
			t.Fatalf("CRD %s: %v", crd.GetName(), err)
		}
	}
	for _, crd := range crds {
		waitEstablished(t, dc.Resource(crdGVR), crd.GetName())
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cluster.Admin)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc))
	for _, u := range manifests(t) {
		// The namespace itself is created for real: the dry-runs of what is in it need it.
		dryRun := u.GetKind() != "Namespace"
		m, err := mapper.RESTMapping(u.GroupVersionKind().GroupKind(), u.GroupVersionKind().Version)
		if err != nil {
			t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
			continue
		}
		var ri dynamic.ResourceInterface = dc.Resource(m.Resource)
		if u.GetNamespace() != "" {
			ri = dc.Resource(m.Resource).Namespace(u.GetNamespace())
		}
		if err := apply(ctx, ri, u, dryRun); err != nil {
			t.Errorf("%s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
}

func apply(ctx context.Context, ri dynamic.ResourceInterface, u *unstructured.Unstructured, dryRun bool) error {
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	opts := metav1.PatchOptions{FieldManager: "async-helm-test", Force: ptr(true)}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = ri.Patch(ctx, u.GetName(), types.ApplyPatchType, raw, opts)
	return err
}

func ptr[T any](v T) *T { return &v }

func waitEstablished(t *testing.T, ri dynamic.NamespaceableResourceInterface, name string) {
	t.Helper()
	for i := 0; i < 200; i++ {
		u, err := ri.Get(context.Background(), name, metav1.GetOptions{})
		if err == nil {
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			for _, c := range conds {
				if m, ok := c.(map[string]interface{}); ok && m["type"] == "Established" && m["status"] == "True" {
					return
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("CRD %s never established", name)
}
