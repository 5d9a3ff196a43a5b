// Package fakekube gives unit tests a Kubernetes without a cluster: client-go's fake
// clientset made to behave like an API server where async-helm relies on it (resource
// versions that change on every write and are checked as preconditions, UIDs, creation
// times), a metadata-only client that reads the same objects, and a clock tests move by hand.
package fakekube

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/metadata"
	k8stesting "k8s.io/client-go/testing"
	testingclock "k8s.io/utils/clock/testing"
)

// Clock is a clock that moves only when told to: k8s.io/utils/clock/testing's FakeClock,
// so the timers and tickers of the code under test fire as a test moves it.
type Clock struct{ *testingclock.FakeClock }

// NewClock starts a clock at t.
func NewClock(t time.Time) *Clock { return &Clock{testingclock.NewFakeClock(t)} }

// Add moves the clock forward by d (FakeClock.Step), firing what falls due.
func (c *Clock) Add(d time.Duration) { c.Step(d) }

// Cluster is a fake API server: a typed clientset and a metadata client over one store.
type Cluster struct {
	*fake.Clientset
	// Clock stamps creationTimestamp on creates.
	Clock *Clock

	mu  sync.Mutex
	rv  int64
	uid int64
	// fail, when set for a verb and resource, makes the next such calls fail with its error.
	fail map[string]error
}

// New builds a fake cluster holding objs.
func New(clock *Clock, objs ...runtime.Object) *Cluster {
	c := &Cluster{Clientset: fake.NewClientset(), Clock: clock, fail: map[string]error{}}
	for _, o := range objs {
		c.stamp(o, true)
		gvrs, err := guessGVR(o)
		if err != nil {
			panic(err)
		}
		m, _ := meta.Accessor(o)
		if err := c.Tracker().Create(gvrs, o, m.GetNamespace()); err != nil {
			panic(err)
		}
	}
	c.PrependReactor("*", "*", c.react)
	return c
}

// Fail makes every later call of verb on resource ("create", "secrets") fail with err; nil clears it.
func (c *Cluster) Fail(verb, resource string, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil {
		delete(c.fail, verb+"/"+resource)
		return
	}
	c.fail[verb+"/"+resource] = err
}

// Typed is the cluster as kubernetes.Interface.
func (c *Cluster) Typed() kubernetes.Interface { return c.Clientset }

func guessGVR(o runtime.Object) (schema.GroupVersionResource, error) {
	switch o.(type) {
	case *corev1.Secret:
		return schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, nil
	case *corev1.Namespace:
		return schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, nil
	}
	return schema.GroupVersionResource{}, fmt.Errorf("fakekube: no resource known for %T", o)
}

// stamp gives an object what the API server would: a new resourceVersion, and on create a
// UID and a creation time.
func (c *Cluster) stamp(o runtime.Object, create bool) {
	m, err := meta.Accessor(o)
	if err != nil {
		return
	}
	c.rv++
	m.SetResourceVersion(strconv.FormatInt(c.rv, 10))
	if create {
		c.uid++
		if m.GetUID() == "" {
			m.SetUID(types.UID(fmt.Sprintf("uid-%d", c.uid)))
		}
		if ts := m.GetCreationTimestamp(); ts.IsZero() && c.Clock != nil {
			m.SetCreationTimestamp(metav1.NewTime(c.Clock.Now()))
		}
	}
}

// react runs before client-go's own reactor (under the fake's lock, so each call is atomic).
func (c *Cluster) react(a k8stesting.Action) (bool, runtime.Object, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.fail[a.GetVerb()+"/"+a.GetResource().Resource]; err != nil {
		return true, nil, err
	}
	// By verb: CreateAction and UpdateAction are the same interface.
	switch a.GetVerb() {
	case "create":
		if a, ok := a.(k8stesting.CreateAction); ok {
			c.stamp(a.GetObject(), true)
		}
	case "update":
		a, ok := a.(k8stesting.UpdateAction)
		if !ok || a.GetSubresource() != "" {
			return false, nil, nil
		}
		m, err := meta.Accessor(a.GetObject())
		if err != nil {
			return false, nil, nil
		}
		cur, err := c.current(a.GetResource(), a.GetNamespace(), m.GetName())
		if err != nil {
			return false, nil, nil // client-go's reactor answers NotFound
		}
		if rv := m.GetResourceVersion(); rv != "" && rv != cur.GetResourceVersion() {
			return true, nil, conflict(a.GetResource(), m.GetName())
		}
		// UID and creation time are the object's for life, whatever the update carries
		// (Helm's driver sends a Secret built anew).
		m.SetUID(cur.GetUID())
		m.SetCreationTimestamp(cur.GetCreationTimestamp())
		c.stamp(a.GetObject(), false)
	case "patch":
		if a, ok := a.(k8stesting.PatchAction); ok {
			return c.patch(a)
		}
	case "delete":
		a, ok := a.(k8stesting.DeleteAction)
		if !ok {
			return false, nil, nil
		}
		cur, err := c.current(a.GetResource(), a.GetNamespace(), a.GetName())
		if err != nil {
			return false, nil, nil
		}
		if p := a.GetDeleteOptions().Preconditions; p != nil {
			if (p.UID != nil && *p.UID != cur.GetUID()) || (p.ResourceVersion != nil && *p.ResourceVersion != cur.GetResourceVersion()) {
				return true, nil, conflict(a.GetResource(), a.GetName())
			}
		}
	}
	return false, nil, nil
}

func conflict(gvr schema.GroupVersionResource, name string) error {
	return apierrors.NewConflict(gvr.GroupResource(), name, fmt.Errorf("the object has been modified"))
}

func (c *Cluster) current(gvr schema.GroupVersionResource, ns, name string) (metav1.Object, error) {
	o, err := c.Tracker().Get(gvr, ns, name)
	if err != nil {
		return nil, err
	}
	return meta.Accessor(o)
}

// patch applies a JSON merge patch, honouring metadata.resourceVersion in it as a precondition.
func (c *Cluster) patch(a k8stesting.PatchAction) (bool, runtime.Object, error) {
	if a.GetPatchType() != types.MergePatchType {
		return false, nil, nil
	}
	gvr := a.GetResource()
	obj, err := c.Tracker().Get(gvr, a.GetNamespace(), a.GetName())
	if err != nil {
		return true, nil, err
	}
	cur, _ := meta.Accessor(obj)
	var p map[string]any
	if err := json.Unmarshal(a.GetPatch(), &p); err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	if md, ok := p["metadata"].(map[string]any); ok {
		if rv, ok := md["resourceVersion"].(string); ok && rv != cur.GetResourceVersion() {
			return true, nil, conflict(gvr, a.GetName())
		}
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return true, nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		return true, nil, err
	}
	merged, err := json.Marshal(mergePatch(doc, p))
	if err != nil {
		return true, nil, err
	}
	out := reflect.New(reflect.TypeOf(obj).Elem()).Interface().(runtime.Object)
	if err := json.Unmarshal(merged, out); err != nil {
		return true, nil, apierrors.NewBadRequest(err.Error())
	}
	c.stamp(out, false)
	if err := c.Tracker().Update(gvr, out, a.GetNamespace()); err != nil {
		return true, nil, err
	}
	return true, out.DeepCopyObject(), nil
}

// mergePatch is RFC 7386: objects merge, null deletes, anything else replaces.
func mergePatch(doc, patch map[string]any) map[string]any {
	if doc == nil {
		doc = map[string]any{}
	}
	for k, v := range patch {
		switch v := v.(type) {
		case nil:
			delete(doc, k)
		case map[string]any:
			sub, _ := doc[k].(map[string]any)
			doc[k] = mergePatch(sub, v)
		default:
			doc[k] = v
		}
	}
	return doc
}

// Metadata is a metadata-only client over the same store, for Secrets.
func (c *Cluster) Metadata() metadata.Interface { return metadataClient{c} }

type metadataClient struct{ c *Cluster }

// IsWatchListSemanticsUnSupported tells informers to list then watch: the fake store
// sends no initial events on a watch.
func (metadataClient) IsWatchListSemanticsUnSupported() bool { return true }

func (m metadataClient) Resource(gvr schema.GroupVersionResource) metadata.Getter {
	return metadataResource{c: m.c, gvr: gvr}
}

type metadataResource struct {
	c   *Cluster
	gvr schema.GroupVersionResource
	ns  string
}

var errUnsupported = fmt.Errorf("fakekube: not supported by the metadata client")

func (r metadataResource) Namespace(ns string) metadata.ResourceInterface {
	r.ns = ns
	return r
}

func (r metadataResource) secretsOnly() error {
	if r.gvr.Resource != "secrets" {
		return fmt.Errorf("fakekube: metadata of %s: %w", r.gvr.Resource, errUnsupported)
	}
	return nil
}

func partial(s *corev1.Secret) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"}, ObjectMeta: *s.ObjectMeta.DeepCopy()}
}

func (r metadataResource) Get(ctx context.Context, name string, o metav1.GetOptions, _ ...string) (*metav1.PartialObjectMetadata, error) {
	if err := r.secretsOnly(); err != nil {
		return nil, err
	}
	s, err := r.c.CoreV1().Secrets(r.ns).Get(ctx, name, o)
	if err != nil {
		return nil, err
	}
	return partial(s), nil
}

func (r metadataResource) List(ctx context.Context, o metav1.ListOptions) (*metav1.PartialObjectMetadataList, error) {
	if err := r.secretsOnly(); err != nil {
		return nil, err
	}
	l, err := r.c.CoreV1().Secrets(r.ns).List(ctx, o)
	if err != nil {
		return nil, err
	}
	out := &metav1.PartialObjectMetadataList{ListMeta: l.ListMeta}
	for i := range l.Items {
		out.Items = append(out.Items, *partial(&l.Items[i]))
	}
	return out, nil
}

func (r metadataResource) Watch(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
	if err := r.secretsOnly(); err != nil {
		return nil, err
	}
	w, err := r.c.CoreV1().Secrets(r.ns).Watch(ctx, o)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if s, ok := e.Object.(*corev1.Secret); ok {
			e.Object = partial(s)
		}
		return e, true
	}), nil
}

func (r metadataResource) Delete(ctx context.Context, name string, o metav1.DeleteOptions, _ ...string) error {
	if err := r.secretsOnly(); err != nil {
		return err
	}
	return r.c.CoreV1().Secrets(r.ns).Delete(ctx, name, o)
}

func (r metadataResource) DeleteCollection(context.Context, metav1.DeleteOptions, metav1.ListOptions) error {
	return errUnsupported
}

func (r metadataResource) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, o metav1.PatchOptions, _ ...string) (*metav1.PartialObjectMetadata, error) {
	if err := r.secretsOnly(); err != nil {
		return nil, err
	}
	s, err := r.c.CoreV1().Secrets(r.ns).Patch(ctx, name, pt, data, o)
	if err != nil {
		return nil, err
	}
	return partial(s), nil
}
