// Package eventing wires the product's local processes through real Knative Eventing, run
// by tools/knative (make cluster-up): it applies config/knative's own Broker and Triggers to
// a namespace, gives the Knative Services they name (submit, executor, notifier) status
// addresses that lead to the local processes, and returns the Broker's ingress URL, the
// K_SINK of submit and the notifier. Events then go submit -> broker ingress -> channel ->
// broker filter -> executor, with the Triggers' delivery (retries, backoff, timeout, dead
// letters to the notifier) applied by Knative itself.
//
// Local overrides, each standing in for something that cannot exist without a cluster's
// Knative install: the Broker's and Triggers' webhook defaults (knativeapply.WebhookDefaults), the
// Services' status (Knative Serving writes it), and the addresses of the in-cluster names
// (tools/knative's proxy). SinkBindings are not applied: the processes get K_SINK directly.
package eventing

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/internal/knativeapply"
)

// The namespace config/knative's objects are written for; Wire moves them to its own.
const manifestNamespace = "async-helm"

var (
	BrokerGVR  = schema.GroupVersionResource{Group: "eventing.knative.dev", Version: "v1", Resource: "brokers"}
	TriggerGVR = schema.GroupVersionResource{Group: "eventing.knative.dev", Version: "v1", Resource: "triggers"}
	ServiceGVR = schema.GroupVersionResource{Group: "serving.knative.dev", Version: "v1", Resource: "services"}
	imcGVR     = schema.GroupVersionResource{Group: "messaging.knative.dev", Version: "v1", Resource: "inmemorychannels"}
)

// Local is the running Knative of tools/knative (its state.json).
type Local struct {
	Kubeconfig string         `json:"kubeconfig"`
	Ports      map[string]int `json:"ports"`
	Pids       map[string]int `json:"pids"`
}

// Dir is where tools/knative keeps its state: $KNATIVE_DIR, else <repo>/.cache/knative.
func Dir(repoRoot string) string {
	if d := os.Getenv("KNATIVE_DIR"); d != "" {
		return d
	}
	return filepath.Join(repoRoot, ".cache", "knative")
}

// Open reads the state of the Knative processes under dir and checks they run against
// kubeconfig.
func Open(dir, kubeconfig string) (*Local, error) {
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if err != nil {
		return nil, fmt.Errorf("knative eventing is not up (make cluster-up, or make knative-up with KUBECONFIG set): %w", err)
	}
	var l Local
	if err := json.Unmarshal(b, &l); err != nil {
		return nil, fmt.Errorf("%s/state.json: %w", dir, err)
	}
	if a, b := absPath(l.Kubeconfig), absPath(kubeconfig); a != b {
		return nil, fmt.Errorf("knative eventing under %s runs against %s, not %s (make knative-up KUBECONFIG=%s)", dir, a, b, kubeconfig)
	}
	for name, pid := range l.Pids {
		if syscall.Kill(pid, 0) != nil {
			return nil, fmt.Errorf("knative process %s (pid %d) is gone; make knative-up restarts them", name, pid)
		}
	}
	return &l, nil
}

func absPath(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}

// Options says what to wire into one namespace.
type Options struct {
	Namespace string
	// ConfigDir is config/knative.
	ConfigDir string
	// Addresses of the local processes by Knative Service name (submit, executor, notifier).
	Addresses map[string]string
	// EventLog, when set, gets the notifier's status events through a Trigger of its own.
	EventLog string
	// Delivery, by Trigger name, replaces fields of that Trigger's spec.delivery before it is
	// applied (a test's local change; changing a delivery later replaces the Subscription,
	// and the dispatcher takes that some time after Knative reports it).
	Delivery map[string]map[string]any
	// Timeout bounds the wait for the Broker and Triggers to become Ready (default 90 s).
	Timeout time.Duration
}

// Wiring is one namespace wired through Knative.
type Wiring struct {
	// BrokerURL is the Broker's ingress on loopback: K_SINK of submit and the notifier.
	BrokerURL string
	// BrokerAddress is what Knative publishes (the in-cluster name).
	BrokerAddress string
	Triggers      []string
	dyn           dynamic.Interface
	ns, broker    string
}

// EventLogTrigger is the name of the Trigger Wire adds for Options.EventLog.
const EventLogTrigger = "event-log"

// Wire applies the Broker, the Triggers and the Services to o.Namespace and waits until
// Knative reports them Ready.
func (l *Local) Wire(ctx context.Context, cfg *rest.Config, o Options) (*Wiring, error) {
	if o.Timeout == 0 {
		o.Timeout = 90 * time.Second
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	m, err := loadManifests(o.ConfigDir, o.Namespace)
	if err != nil {
		return nil, err
	}
	w := &Wiring{dyn: dyn, ns: o.Namespace}
	// The Services first: a Trigger whose subscriber does not resolve yet is retried by its
	// controller only after a backoff.
	if err := w.applyServices(ctx, m.services, o.Addresses); err != nil {
		return nil, err
	}
	b := m.broker
	if err := w.applyBroker(ctx, b); err != nil {
		return nil, err
	}
	deadline := time.Now().Add(o.Timeout)
	triggers := m.triggers
	if o.EventLog != "" {
		triggers = append(triggers, eventLogTrigger(o.Namespace, b.GetName(), o.EventLog))
	}
	// The Triggers once the Broker is Ready. The Trigger controller requeues a Trigger on
	// its Broker's update only by the broker label (WebhookDefaults writes it); applying
	// them afterwards also spares each a first reconcile against an unready Broker.
	got, err := w.waitReady(ctx, BrokerGVR, deadline, b.GetName())
	if err != nil {
		return nil, err
	}
	if err := w.applyTriggers(ctx, triggers, o.Delivery); err != nil {
		return nil, err
	}
	if _, err := w.waitReady(ctx, TriggerGVR, deadline, w.Triggers...); err != nil {
		return nil, err
	}
	if err := w.setBrokerURL(got[b.GetName()], l.Ports["ingress"]); err != nil {
		return nil, err
	}
	if err := w.probe(ctx, w.broker, deadline); err != nil {
		return nil, err
	}
	return w, nil
}

// manifests are config/knative's objects Wire applies, moved to the namespace.
type manifests struct {
	broker             *unstructured.Unstructured
	triggers, services []*unstructured.Unstructured
}

// loadManifests reads dir's Broker (exactly one), Triggers and Knative Services, moved to ns.
func loadManifests(dir, ns string) (*manifests, error) {
	objs, err := readManifests(dir)
	if err != nil {
		return nil, err
	}
	m := &manifests{}
	var brokers []*unstructured.Unstructured
	for _, u := range objs {
		moveNamespace(u.Object, ns)
		switch u.GetKind() {
		case "Broker":
			brokers = append(brokers, u)
		case "Trigger":
			m.triggers = append(m.triggers, u)
		case "Service":
			if u.GetAPIVersion() == "serving.knative.dev/v1" {
				m.services = append(m.services, u)
			}
		}
	}
	if len(brokers) != 1 {
		return nil, fmt.Errorf("%s: want one Broker, found %d", dir, len(brokers))
	}
	m.broker = brokers[0]
	return m, nil
}

// applyServices applies the Knative Services and gives each its local address.
func (w *Wiring) applyServices(ctx context.Context, services []*unstructured.Unstructured, addrs map[string]string) error {
	for _, s := range services {
		addr, ok := addrs[s.GetName()]
		if !ok {
			return fmt.Errorf("no local address for the Knative Service %s", s.GetName())
		}
		if err := w.apply(ctx, ServiceGVR, s); err != nil {
			return err
		}
		if err := w.SetAddress(ctx, s.GetName(), addr); err != nil {
			return err
		}
	}
	return nil
}

// applyBroker applies the Broker with its webhook defaults, after its channel (asyncChannel).
func (w *Wiring) applyBroker(ctx context.Context, b *unstructured.Unstructured) error {
	knativeapply.WebhookDefaults(b)
	if err := w.asyncChannel(ctx, b); err != nil {
		return err
	}
	return w.apply(ctx, BrokerGVR, b)
}

// applyTriggers applies the Triggers, each with its delivery overrides and webhook defaults,
// and records their names.
func (w *Wiring) applyTriggers(ctx context.Context, triggers []*unstructured.Unstructured, delivery map[string]map[string]any) error {
	for _, t := range triggers {
		if d, ok := delivery[t.GetName()]; ok {
			if err := overrideDelivery(t, d); err != nil {
				return err
			}
		}
		knativeapply.WebhookDefaults(t)
		if err := w.apply(ctx, TriggerGVR, t); err != nil {
			return err
		}
		w.Triggers = append(w.Triggers, t.GetName())
	}
	// An override for a Trigger the manifests do not have would be lost without a word.
	for name := range delivery {
		if !slices.Contains(w.Triggers, name) {
			return fmt.Errorf("delivery override for Trigger %q: no such Trigger (have %v)", name, w.Triggers)
		}
	}
	return nil
}

// overrideDelivery replaces the fields d names in t's spec.delivery.
func overrideDelivery(t *unstructured.Unstructured, d map[string]any) error {
	cur, _, _ := unstructured.NestedMap(t.Object, "spec", "delivery")
	if cur == nil {
		cur = map[string]any{}
	}
	for k, v := range d {
		cur[k] = v
	}
	return unstructured.SetNestedMap(t.Object, cur, "spec", "delivery")
}

// setBrokerURL records the Broker's published address and its path on the local ingress.
func (w *Wiring) setBrokerURL(b *unstructured.Unstructured, ingressPort int) error {
	w.BrokerAddress, _, _ = unstructured.NestedString(b.Object, "status", "address", "url")
	u, err := url.Parse(w.BrokerAddress)
	if err != nil || u.Path == "" {
		return fmt.Errorf("Broker %s/%s: address %q", w.ns, b.GetName(), w.BrokerAddress)
	}
	w.BrokerURL = fmt.Sprintf("http://127.0.0.1:%d%s", ingressPort, u.Path)
	w.broker = b.GetName()
	return nil
}

// asyncChannel creates the Broker's InMemoryChannel before the Broker does, as the Broker
// would (name, labels, its delivery), plus the annotation that makes it acknowledge an
// event once it holds it. By default the InMemoryChannel dispatcher answers the ingress only
// after every Trigger's delivery has ended, retries included, and the executor holds its
// delivery open while Helm runs: submit's 201 would wait for the whole Helm action (a Broker
// backed by Kafka acknowledges once the event is stored; this is the in-memory equivalent).
// The dispatcher reads the annotation only when the channel first becomes ready, hence
// before the Broker controller creates it.
func (w *Wiring) asyncChannel(ctx context.Context, broker *unstructured.Unstructured) error {
	delivery, _, _ := unstructured.NestedMap(broker.Object, "spec", "delivery")
	imc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "messaging.knative.dev/v1", "kind": "InMemoryChannel",
		"metadata": map[string]any{
			"name": broker.GetName() + "-kne-trigger", "namespace": w.ns,
			"labels":      map[string]any{"eventing.knative.dev/broker": broker.GetName(), "eventing.knative.dev/brokerEverything": "true"},
			"annotations": map[string]any{"eventing.knative.dev/scope": "cluster", "messaging.knative.dev/async-handler": "true"},
		},
		"spec": map[string]any{},
	}}
	if delivery != nil {
		_ = unstructured.SetNestedMap(imc.Object, delivery, "spec", "delivery")
	}
	return w.apply(ctx, imcGVR, imc)
}

// eventLogTrigger delivers the notifier's status and progress events.
func eventLogTrigger(ns, broker, uri string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "eventing.knative.dev/v1", "kind": "Trigger",
		"metadata": map[string]any{"name": EventLogTrigger, "namespace": ns},
		"spec": map[string]any{
			"broker": broker,
			"filters": []any{map[string]any{"any": []any{
				map[string]any{"prefix": map[string]any{"type": "dev.asynchelm.release.status."}},
				map[string]any{"exact": map[string]any{"type": "dev.asynchelm.release.progress"}},
			}}},
			"subscriber": map[string]any{"uri": uri},
			"delivery":   map[string]any{"retry": int64(10), "backoffPolicy": "exponential", "backoffDelay": "PT0.5S"},
		},
	}}
}

// SetAddress points the Knative Service name at url, as Knative Serving would with its route.
func (w *Wiring) SetAddress(ctx context.Context, name, addr string) error {
	patch := map[string]any{"status": map[string]any{
		"url":     addr,
		"address": map[string]any{"url": addr},
		"conditions": []any{map[string]any{
			"type": "Ready", "status": "True", "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}},
	}}
	b, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	_, err = w.dyn.Resource(ServiceGVR).Namespace(w.ns).Patch(ctx, name, types.MergePatchType, b, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("Service %s/%s status: %w", w.ns, name, err)
	}
	return nil
}

func (w *Wiring) apply(ctx context.Context, gvr schema.GroupVersionResource, u *unstructured.Unstructured) error {
	b, err := u.MarshalJSON()
	if err != nil {
		return err
	}
	force := true
	_, err = w.dyn.Resource(gvr).Namespace(w.ns).Patch(ctx, u.GetName(), types.ApplyPatchType, b,
		metav1.PatchOptions{FieldManager: "async-helm-local", Force: &force})
	if err != nil {
		return fmt.Errorf("apply %s %s/%s: %w", u.GetKind(), w.ns, u.GetName(), err)
	}
	return nil
}

func notReady(conds []any) string {
	var out []string
	for _, c := range conds {
		if m, _ := c.(map[string]any); m["status"] != "True" {
			out = append(out, fmt.Sprintf("%v=%v %v: %v", m["type"], m["status"], m["reason"], m["message"]))
		}
	}
	sort.Strings(out)
	if len(out) == 0 {
		return "no status yet"
	}
	return strings.Join(out, "; ")
}

// moveNamespace rewrites every "namespace: async-helm" of a manifest (metadata and the refs
// of subscribers and dead-letter sinks) to ns.
func moveNamespace(v any, ns string) {
	switch t := v.(type) {
	case map[string]any:
		for k, x := range t {
			if s, ok := x.(string); ok && k == "namespace" && s == manifestNamespace {
				t[k] = ns
				continue
			}
			moveNamespace(x, ns)
		}
	case []any:
		for _, x := range t {
			moveNamespace(x, ns)
		}
	}
}

// readManifests reads the YAML documents of dir/*.yaml.
func readManifests(dir string) ([]*unstructured.Unstructured, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no manifests under %s: %v", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var raw json.RawMessage
			if err := d.Decode(&raw); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			if len(bytes.TrimSpace(raw)) == 0 || string(raw) == "null" {
				continue
			}
			u := &unstructured.Unstructured{}
			if err := u.UnmarshalJSON(raw); err != nil {
				return nil, fmt.Errorf("%s: %w", f, err)
			}
			out = append(out, u)
		}
	}
	return out, nil
}

// Functions are the ports of the three functions: Knative must know their addresses before
// they start, so they are chosen first.
type Functions struct{ Submit, Executor, Notifier int }

// FreeFunctions picks three distinct free loopback ports.
func FreeFunctions() (Functions, error) {
	var f Functions
	taken := map[int]bool{}
	for _, p := range []*int{&f.Submit, &f.Executor, &f.Notifier} {
		port, err := freePortBelowEphemeral(taken)
		if err != nil {
			return f, err
		}
		*p, taken[port] = port, true
	}
	return f, nil
}

// freePortBelowEphemeral picks a free port under Linux's ephemeral range (32768 and up), where
// every ":0" listener and outgoing connection of a test process takes its port: a port
// picked here and bound a moment later by a function's process is not handed to another
// test's receiver in between, as a ":0" port, closed and reused, could be.
func freePortBelowEphemeral(taken map[int]bool) (int, error) {
	const lo, hi = 20000, 32768
	for try := 0; try < 200; try++ {
		port := lo + rand.IntN(hi-lo)
		if taken[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		l.Close()
		return port, nil
	}
	return 0, fmt.Errorf("no free port in %d-%d after 200 tries", lo, hi-1)
}

// Addresses are the Knative Services' addresses for Options.Addresses.
func (f Functions) Addresses() map[string]string {
	u := func(p int) string { return fmt.Sprintf("http://127.0.0.1:%d", p) }
	return map[string]string{"submit": u(f.Submit), "executor": u(f.Executor), "notifier": u(f.Notifier)}
}

// RSS is the resident memory of the Knative processes, in MiB, in total and by name.
func (l *Local) RSS() (int, map[string]int) {
	by := map[string]int{}
	total := 0
	for name, pid := range l.Pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				var kb int
				fmt.Sscanf(strings.TrimSpace(v), "%d", &kb)
				by[name] = kb / 1024
				total += kb / 1024
			}
		}
	}
	return total, by
}
