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
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	eventingv1 "knative.dev/eventing/pkg/apis/eventing/v1"
	"knative.dev/eventing/pkg/apis/feature"
	sourcesv1 "knative.dev/eventing/pkg/apis/sources/v1"
	"knative.dev/pkg/apis"
	servingconfig "knative.dev/serving/pkg/apis/config"
	servingv1 "knative.dev/serving/pkg/apis/serving/v1"

	"github.com/async-helm/async-helm/internal/knativeapply"
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
// (600): the cluster must raise it, as docs/deploy.md says. The test validates with that setting.
func servingContext(t *testing.T) context.Context {
	d, err := servingconfig.NewDefaultsConfigFromMap(map[string]string{"max-revision-timeout-seconds": "3600"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := servingconfig.ToContext(context.Background(), &servingconfig.Config{Defaults: d})
	// The executor's Triggers set delivery.timeout (an action may take the better part of an
	// hour): eventing's delivery-timeout feature must be enabled, as docs/deploy.md says.
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

// configValue is a key of the async-helm ConfigMap every function reads.
func configValue(t *testing.T, key string) string {
	t.Helper()
	for _, u := range manifests(t) {
		if u.GetKind() == "ConfigMap" && u.GetName() == "async-helm" {
			if v, ok, _ := unstructured.NestedString(u.Object, "data", key); ok {
				return v
			}
		}
	}
	t.Fatalf("no %s in the async-helm ConfigMap", key)
	return ""
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
		// Deliveries must reach the pod's fair queue beyond the actions it holds (with a
		// slot, and lent while they wait): up to 2 x MAX_PARALLEL.
		parallel, err := strconv.ParseInt(configValue(t, "MAX_PARALLEL"), 10, 64)
		if err != nil {
			t.Fatalf("MAX_PARALLEL: %v", err)
		}
		waiting, err := strconv.ParseInt(configValue(t, "MAX_WAITING"), 10, 64)
		if err != nil || waiting <= 0 {
			t.Fatalf("MAX_WAITING %q: %v", configValue(t, "MAX_WAITING"), err)
		}
		if cc < 2*parallel+waiting {
			t.Errorf("containerConcurrency %d, want at least 2 x MAX_PARALLEL (%d) + MAX_WAITING (%d): every waiting delivery must reach the fair queue", cc, parallel, waiting)
		}
		// A delivery waits for a slot as long as its sender waits, less the action's deadline.
		if d, err := time.ParseDuration(configValue(t, "DELIVERY_TIMEOUT")); err != nil || d != time.Duration(timeout)*time.Second {
			t.Errorf("DELIVERY_TIMEOUT %s (%v), want the executor's timeoutSeconds %d", configValue(t, "DELIVERY_TIMEOUT"), err, timeout)
		}
		return
	}
	t.Fatal("no executor Service")
}

func TestManifestsPassServerSideDryRunWithKnativeCRDs(t *testing.T) {
	ctx := context.Background()
	// The CRDs come from the knative.dev module zips (internal/knativeapply, shared with
	// make deploy-local).
	if n, err := knativeapply.InstallCRDs(ctx, cluster.Admin); err != nil || n < 8 {
		t.Fatalf("installing the Knative CRDs: %d, %v", n, err)
	}
	a, err := knativeapply.NewApplier(cluster.Admin, "async-helm-test")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range manifests(t) {
		// The namespace itself is created for real: the dry-runs of what is in it need it.
		dryRun := u.GetKind() != "Namespace"
		if err := a.Apply(ctx, u, dryRun); err != nil {
			t.Error(err)
		}
	}
}

func apply(ctx context.Context, ri dynamic.ResourceInterface, u *unstructured.Unstructured, dryRun bool) error {
	return knativeapply.ApplyTo(ctx, ri, u, "async-helm-test", dryRun)
}

// submit's synchronous routes answer 504 after SYNC_TIMEOUT: Knative must not cut the
// request before (with a margin to write the answer), or the designed 504 is never sent.
func TestSubmitSyncTimeoutFitsItsRequestTimeout(t *testing.T) {
	found := false
	for _, u := range manifests(t) {
		if u.GetKind() != "Service" || u.GetName() != "submit" {
			continue
		}
		found = true
		timeout, ok, _ := unstructured.NestedInt64(u.Object, "spec", "template", "spec", "timeoutSeconds")
		if !ok {
			t.Fatal("submit's Service sets no timeoutSeconds")
		}
		sync := ""
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			env, _, _ := unstructured.NestedSlice(c.(map[string]any), "env")
			for _, e := range env {
				if e := e.(map[string]any); e["name"] == "SYNC_TIMEOUT" {
					sync, _ = e["value"].(string)
				}
			}
		}
		d, err := time.ParseDuration(sync)
		if err != nil {
			t.Fatalf("submit's SYNC_TIMEOUT %q: %v (set it on the Service, beside timeoutSeconds)", sync, err)
		}
		if limit := time.Duration(timeout)*time.Second - 10*time.Second; d > limit {
			t.Errorf("SYNC_TIMEOUT %s, timeoutSeconds %d: the wait must end at least 10s before Knative cuts the request", d, timeout)
		}
	}
	if !found {
		t.Fatal("no submit Service among the manifests")
	}
}

// The notifier runs as a fixed pair: both report status, the elected one sweeps, and a
// dead one is replaced by the other within the election's bound. Knative must neither
// scale it to zero (nothing would report or sweep) nor add pods on load (each pod reports
// every change: more pods only multiply duplicates).
func TestNotifierRunsAFixedPairWithItsElectionRole(t *testing.T) {
	var scale []string
	roles := map[string]bool{}
	for _, u := range manifests(t) {
		switch {
		case u.GetKind() == "Service" && u.GetName() == "notifier":
			a, _, _ := unstructured.NestedStringMap(u.Object, "spec", "template", "metadata", "annotations")
			scale = []string{a["autoscaling.knative.dev/min-scale"], a["autoscaling.knative.dev/max-scale"]}
		case u.GetKind() == "Role" || u.GetKind() == "RoleBinding":
			roles[u.GetKind()+"/"+u.GetNamespace()+"/"+u.GetName()] = true
		}
	}
	if len(scale) != 2 || scale[0] != "2" || scale[1] != "2" {
		t.Errorf("notifier min-scale/max-scale %v, want 2/2", scale)
	}
	for _, k := range []string{"Role/async-helm/async-helm-notifier-leader", "RoleBinding/async-helm/async-helm-notifier-leader"} {
		if !roles[k] {
			t.Errorf("no %s: the notifiers cannot elect their sweeper", k)
		}
	}
}
