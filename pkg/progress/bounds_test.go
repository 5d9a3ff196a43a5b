package progress

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/resource"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// counted is a fake clientset that counts the objects its answers carry, its lists answered
// in pages of the limit asked, as the API server answers them.
func counted(objs ...runtime.Object) (*fake.Clientset, *int) {
	cs := fake.NewSimpleClientset(objs...)
	n := new(int)
	read := k8stesting.ObjectReaction(cs.Tracker())
	cs.PrependReactor("*", "*", func(a k8stesting.Action) (bool, runtime.Object, error) {
		handled, obj, err := read(a)
		if err != nil {
			return handled, obj, err
		}
		if l, ok := a.(k8stesting.ListActionImpl); ok {
			items, _ := meta.ExtractList(obj)
			sort.Slice(items, func(i, j int) bool { return name(items[i]) < name(items[j]) })
			from, _ := strconv.Atoi(l.ListOptions.Continue)
			items, more := items[from:], ""
			if lim := int(l.ListOptions.Limit); lim > 0 && lim < len(items) {
				items, more = items[:lim], strconv.Itoa(from+lim)
			}
			_ = meta.SetList(obj, items)
			obj.(metav1.ListInterface).SetContinue(more)
			*n += len(items)
		} else {
			*n++
		}
		return handled, obj, err
	})
	return cs, n
}

func name(o runtime.Object) string { m, _ := meta.Accessor(o); return m.GetName() }

// A tenant's namespace holds 2,000 Deployments and 5,000 Warning events that are not the
// release's: a progress read reads the release's two workloads by name and at most
// eventPages pages of events, whatever the namespace holds.
func TestAProgressReadIsBoundedByTheRelease(t *testing.T) {
	now := time.Now()
	var objs []runtime.Object
	for i := 0; i < 2000; i++ {
		objs = append(objs, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("flood-%04d", i), Namespace: "ns"}})
	}
	for i := 0; i < 5000; i++ {
		objs = append(objs, warning(fmt.Sprintf("e%04d", i), "Pod", fmt.Sprintf("flood-%04d-x", i%2000), "R", "m", now))
	}
	ours := metav1.ObjectMeta{Namespace: "ns", Annotations: map[string]string{releaseNameAnnotation: "web"}}
	for _, n := range []string{"web", "db"} {
		m := *ours.DeepCopy()
		m.Name = n
		objs = append(objs, &appsv1.Deployment{ObjectMeta: m})
	}
	cs, read := counted(objs...)
	c := &Collector{Client: cs, Namespace: "ns", Release: "web", Since: now.Add(-time.Minute),
		Applied: func() []string { return []string{"Deployment/web", "Deployment/db"} }}
	var p Progress
	if err := c.Workloads(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	if p.Total != 2 {
		t.Errorf("total %d, want 2", p.Total)
	}
	t.Logf("one progress read read %d objects", *read)
	if most := 2 + 500; *read > most {
		t.Errorf("one progress read read %d objects, want at most %d (the release's 2 workloads, 500 events)", *read, most)
	}
}

// Of a release of 100 Deployments, its kube client names MaxWorkloads: the progress read
// counts and reads those; a warning's line is cut at MaxLineBytes.
func TestWaitingForAndWarningsAreBounded(t *testing.T) {
	now := time.Now()
	var objs []runtime.Object
	var applied []*resource.Info
	mapping := &meta.RESTMapping{GroupVersionKind: appsv1.SchemeGroupVersion.WithKind("Deployment")}
	for i := 0; i < 100; i++ {
		m := metav1.ObjectMeta{Name: fmt.Sprintf("w%03d", i), Namespace: "ns", Annotations: map[string]string{releaseNameAnnotation: "web"}}
		objs = append(objs, &appsv1.Deployment{ObjectMeta: m})
		applied = append(applied, &resource.Info{Name: m.Name, Mapping: mapping})
	}
	objs = append(objs, warning("big", "Pod", "w000-x", "BackOff", strings.Repeat("é", 10000), now))
	phases := NewPhases(nil)
	phases.Log(LogCreateRelease, len(applied), WorkloadsOf(applied))
	cs, read := counted(objs...)
	c := &Collector{Client: cs, Namespace: "ns", Release: "web", Since: now.Add(-time.Minute), Applied: phases.Workloads}
	var p Progress
	if err := c.Workloads(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	if p.Total != MaxWorkloads || p.Ready != 0 || len(p.WaitingFor) != MaxWorkloads || *read > MaxWorkloads+1 {
		t.Errorf("ready %d/%d, waiting for %d named, %d objects read; want 0/%d, %[5]d named, %d read",
			p.Ready, p.Total, len(p.WaitingFor), *read, MaxWorkloads, MaxWorkloads+1)
	}
	if len(p.Warnings) != 1 || len(p.Warnings[0]) > MaxLineBytes+len("…") {
		t.Errorf("warnings of %d bytes, want one of at most %d", len(strings.Join(p.Warnings, "")), MaxLineBytes)
	}
}

// The kube client names the workloads among what it applies (a CRD's "Deployment" and a
// name the API server would refuse are none), at most MaxWorkloads; Phases keeps the
// latest create's or update's.
func TestPhasesKeepTheWorkloadsTheKubeClientApplied(t *testing.T) {
	info := func(group, kind, name string) *resource.Info {
		return &resource.Info{Name: name, Mapping: &meta.RESTMapping{GroupVersionKind: schema.GroupVersionKind{Group: group, Version: "v1", Kind: kind}}}
	}
	objs := []*resource.Info{info("apps", "Deployment", "web"), info("", "ConfigMap", "cfg"), info("batch", "Job", "migrate"),
		info("example.com", "Deployment", "crd"), info("apps", "StatefulSet", "Bad Name"), nil}
	p := NewPhases(nil)
	p.Log(LogCreateRelease, len(objs), WorkloadsOf(objs))
	if got := strings.Join(p.Workloads(), ","); got != "Deployment/web,Job/migrate" {
		t.Errorf("after the create: %s", got)
	}
	var many []*resource.Info
	for i := 0; i < 100; i++ {
		many = append(many, info("apps", "DaemonSet", fmt.Sprint("d", i)))
	}
	p.Log(LogUpdateRelease, len(many), WorkloadsOf(many))
	if got := p.Workloads(); len(got) != MaxWorkloads || got[0] != "DaemonSet/d0" {
		t.Errorf("after the update: %d named, first %v", len(got), got[:1])
	}
	if WorkloadsOf(objs[1:2]) != "" {
		t.Error("a ConfigMap named as a workload")
	}
}
