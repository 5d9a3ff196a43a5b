// Package knativeapply puts manifests into a cluster the way `kubectl apply --server-side`
// does, and installs the Knative CRDs shipped in the knative.dev module zips, so that the
// manifest tests and `make deploy-local` need no kubectl and no download.
package knativeapply

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"sigs.k8s.io/yaml"
)

var crdGVR = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// crdDirs are the CRDs of Knative Serving and Eventing inside their module zips.
var crdDirs = map[string]string{
	"knative.dev/serving":  "config/core/300-resources",
	"knative.dev/eventing": "config/core/resources",
}

// CRDs reads the Knative Serving and Eventing CRDs from the module zips of the versions
// go.mod pins (`go list -m` from within the module).
func CRDs() ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for mod, dir := range crdDirs {
		b, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", mod).Output()
		if err != nil {
			return nil, fmt.Errorf("go list -m %s: %w", mod, err)
		}
		files, err := filepath.Glob(filepath.Join(strings.TrimSpace(string(b)), dir, "*.yaml"))
		if err != nil {
			return nil, err
		}
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				return nil, err
			}
			var u unstructured.Unstructured
			if err := yaml.Unmarshal(raw, &u.Object); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if u.GetKind() == "CustomResourceDefinition" {
				out = append(out, &u)
			}
		}
	}
	return out, nil
}

// InstallCRDs creates the Knative CRDs the cluster lacks and waits until all are
// established. CRDs that exist are left as they are: a local Eventing install may have
// changed them (conversion webhooks it does not run), a real cluster's are its own.
func InstallCRDs(ctx context.Context, cfg *rest.Config) (int, error) {
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return 0, err
	}
	crds, err := CRDs()
	if err != nil {
		return 0, err
	}
	created := 0
	for _, crd := range crds {
		_, err := dc.Resource(crdGVR).Create(ctx, crd, metav1.CreateOptions{FieldManager: "async-helm"})
		switch {
		case err == nil:
			created++
		case apierrors.IsAlreadyExists(err):
		default:
			return created, fmt.Errorf("CRD %s: %w", crd.GetName(), err)
		}
	}
	for _, crd := range crds {
		if err := WaitEstablished(ctx, dc.Resource(crdGVR), crd.GetName()); err != nil {
			return created, err
		}
	}
	return len(crds), nil
}

// WaitEstablished waits (30 s at most) until the API server serves the CRD name.
func WaitEstablished(ctx context.Context, ri dynamic.ResourceInterface, name string) error {
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		u, err := ri.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		for _, c := range conds {
			if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("CRD %s not established: %w", name, err)
	}
	return nil
}

// Decode reads every object of a multi-document YAML or JSON stream.
func Decode(r io.Reader) ([]*unstructured.Unstructured, error) {
	d := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	var out []*unstructured.Unstructured
	for {
		var raw json.RawMessage
		if err := d.Decode(&raw); errors.Is(err, io.EOF) {
			return out, nil
		} else if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
			continue
		}
		var u unstructured.Unstructured
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, err
		}
		out = append(out, &u)
	}
}

// Applier applies objects server-side, with force: the manifests own the fields they set.
type Applier struct {
	dyn          dynamic.Interface
	mapper       meta.ResettableRESTMapper
	fieldManager string
}

// NewApplier builds an Applier; build it after the CRDs are installed, or call Reset.
func NewApplier(cfg *rest.Config, fieldManager string) (*Applier, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Applier{dyn: dyn, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(disc)), fieldManager: fieldManager}, nil
}

// Resource is the client of u's kind, in u's namespace when it has one.
func (a *Applier) Resource(u *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := u.GroupVersionKind()
	m, err := a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", u.GetKind(), u.GetName(), err)
	}
	if m.Scope.Name() == meta.RESTScopeNameNamespace {
		return a.dyn.Resource(m.Resource).Namespace(u.GetNamespace()), nil
	}
	return a.dyn.Resource(m.Resource), nil
}

// Apply applies u (a dry run when dryRun).
func (a *Applier) Apply(ctx context.Context, u *unstructured.Unstructured, dryRun bool) error {
	ri, err := a.Resource(u)
	if err != nil {
		return err
	}
	if err := ApplyTo(ctx, ri, u, a.fieldManager, dryRun); err != nil {
		return fmt.Errorf("%s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// ApplyAll applies Namespaces first, then the rest in order.
func (a *Applier) ApplyAll(ctx context.Context, objs []*unstructured.Unstructured) error {
	for _, pass := range []func(*unstructured.Unstructured) bool{
		func(u *unstructured.Unstructured) bool { return u.GetKind() == "Namespace" },
		func(u *unstructured.Unstructured) bool { return u.GetKind() != "Namespace" },
	} {
		for _, u := range objs {
			if pass(u) {
				if err := a.Apply(ctx, u, false); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// ApplyTo is one server-side apply through ri.
func ApplyTo(ctx context.Context, ri dynamic.ResourceInterface, u *unstructured.Unstructured, fieldManager string, dryRun bool) error {
	raw, err := json.Marshal(u.Object)
	if err != nil {
		return err
	}
	force := true
	opts := metav1.PatchOptions{FieldManager: fieldManager, Force: &force}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	_, err = ri.Patch(ctx, u.GetName(), types.ApplyPatchType, raw, opts)
	return err
}

// EnsureSigningKey creates the Secret holding the events' signing key with 32 random bytes
// (hex) when it does not exist, and keeps an existing one: a key is never shipped in the
// manifests. It reports whether it created the Secret.
func EnsureSigningKey(ctx context.Context, c kubernetes.Interface, namespace, name string) (bool, error) {
	_, err := c.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
	if err == nil {
		return false, nil
	}
	if !apierrors.IsNotFound(err) {
		return false, fmt.Errorf("secret %s/%s: %w", namespace, name, err)
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return false, err
	}
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{"EVENT_SIGNING_KEY": hex.EncodeToString(key)},
	}
	if _, err := c.CoreV1().Secrets(namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("secret %s/%s: %w", namespace, name, err)
	}
	return true, nil
}

// The Secret the functions read the signing key from (config/knative).
const (
	signingKeyNamespace = "async-helm"
	signingKeySecret    = "async-helm-events"
)

// Deploy installs the missing Knative CRDs and applies objs server-side (Namespaces
// first). The signing key is never taken from the manifests: a Secret of that name in them
// (an older config shipped a placeholder) is left out, and Deploy creates the Secret with a
// random key unless it exists, as `make deploy` does. It returns what it applied.
func Deploy(ctx context.Context, cfg *rest.Config, objs []*unstructured.Unstructured, fieldManager string) ([]*unstructured.Unstructured, error) {
	if _, err := InstallCRDs(ctx, cfg); err != nil {
		return nil, err
	}
	a, err := NewApplier(cfg, fieldManager)
	if err != nil {
		return nil, err
	}
	var applied, rest []*unstructured.Unstructured
	for _, u := range objs {
		switch {
		case u.GetKind() == "Secret" && u.GetNamespace() == signingKeyNamespace && u.GetName() == signingKeySecret:
		case u.GetKind() == "Namespace":
			if err := a.Apply(ctx, u, false); err != nil {
				return nil, err
			}
			applied = append(applied, u)
		default:
			rest = append(rest, u)
		}
	}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	if _, err := EnsureSigningKey(ctx, c, signingKeyNamespace, signingKeySecret); err != nil {
		return nil, err
	}
	if err := a.ApplyAll(ctx, rest); err != nil {
		return nil, err
	}
	return append(applied, rest...), nil
}

// WebhookDefaults writes into a Broker or Trigger what Knative Eventing's webhook would on
// a cluster that runs it. A Broker gets its class (config/knative sets it) and spec.config,
// the channel the class uses; a Trigger the label naming its Broker, by which the Trigger
// controller finds the Triggers to reconcile again when their Broker becomes Ready (without
// it a Trigger applied before its Broker stays "Broker has not yet been reconciled"). The
// local cluster runs Eventing's controllers without the webhook; a real cluster's webhook
// writes its own defaults (a Kafka channel, say), so only local applies call this.
func WebhookDefaults(u *unstructured.Unstructured) {
	switch u.GetKind() {
	case "Broker":
		ann := u.GetAnnotations()
		if ann == nil {
			ann = map[string]string{}
		}
		if ann["eventing.knative.dev/broker.class"] == "" {
			ann["eventing.knative.dev/broker.class"] = "MTChannelBasedBroker"
		}
		u.SetAnnotations(ann)
		if _, ok, _ := unstructured.NestedMap(u.Object, "spec", "config"); !ok {
			_ = unstructured.SetNestedMap(u.Object, map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap", "name": "config-br-default-channel", "namespace": "knative-eventing",
			}, "spec", "config")
		}
	case "Trigger":
		broker, _, _ := unstructured.NestedString(u.Object, "spec", "broker")
		if broker == "" {
			return
		}
		labels := u.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels["eventing.knative.dev/broker"] = broker
		u.SetLabels(labels)
	}
}
