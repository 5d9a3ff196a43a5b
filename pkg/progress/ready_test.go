package progress

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// The readiness rules, one by one (kubectl rollout status's, for each kind).
func TestReadinessRules(t *testing.T) {
	gen := metav1.ObjectMeta{Generation: 3}
	for _, tc := range []struct {
		name  string
		ready bool
		got   bool
	}{
		{"deployment ready", true, deploymentReady(&appsv1.Deployment{ObjectMeta: gen, Spec: appsv1.DeploymentSpec{Replicas: replicas(2)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}})},
		{"deployment spec not yet observed", false, deploymentReady(&appsv1.Deployment{ObjectMeta: gen, Spec: appsv1.DeploymentSpec{Replicas: replicas(2)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}})},
		{"deployment without replicas wants one", false, deploymentReady(&appsv1.Deployment{ObjectMeta: gen,
			Status: appsv1.DeploymentStatus{ObservedGeneration: 3}})},
		{"deployment scaled to zero", true, deploymentReady(&appsv1.Deployment{ObjectMeta: gen, Spec: appsv1.DeploymentSpec{Replicas: replicas(0)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 3}})},
		{"statefulset ready", true, statefulSetReady(&appsv1.StatefulSet{ObjectMeta: gen, Spec: appsv1.StatefulSetSpec{Replicas: replicas(3)},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 3, ReadyReplicas: 3, UpdatedReplicas: 3}})},
		{"statefulset old pods ready", false, statefulSetReady(&appsv1.StatefulSet{ObjectMeta: gen, Spec: appsv1.StatefulSetSpec{Replicas: replicas(3)},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 3, ReadyReplicas: 3, UpdatedReplicas: 1}})},
		{"daemonset ready", true, daemonSetReady(&appsv1.DaemonSet{ObjectMeta: gen,
			Status: appsv1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 4, NumberReady: 4, UpdatedNumberScheduled: 4}})},
		{"daemonset one node behind", false, daemonSetReady(&appsv1.DaemonSet{ObjectMeta: gen,
			Status: appsv1.DaemonSetStatus{ObservedGeneration: 3, DesiredNumberScheduled: 4, NumberReady: 3, UpdatedNumberScheduled: 4}})},
		{"job complete", true, jobDone(&batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}})},
		{"job failed is not done", false, jobDone(&batchv1.Job{Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobFailed, Status: corev1.ConditionTrue}, {Type: batchv1.JobComplete, Status: corev1.ConditionFalse}}}})},
	} {
		if tc.got != tc.ready {
			t.Errorf("%s: ready %v, want %v", tc.name, tc.got, tc.ready)
		}
	}
}

// Warning events name a workload or one of its pods ("<workload>-..."), never a workload
// whose name merely starts the same.
func TestRelatedTo(t *testing.T) {
	states := []state{{name: "web"}, {name: "db"}}
	for name, want := range map[string]bool{"web": true, "web-5d9c-abcde": true, "db-0": true,
		"webhook": false, "web2-0": false, "other": false, "": false} {
		if relatedTo(name, states) != want {
			t.Errorf("relatedTo(%q) = %v", name, !want)
		}
	}
}

// At most MaxWarnings, newest first; event time and creation time stand in when
// lastTimestamp is unset.
func TestWarningsNewestFirstAndBounded(t *testing.T) {
	now := time.Now()
	ours := metav1.ObjectMeta{Name: "web", Namespace: "ns", Annotations: map[string]string{releaseNameAnnotation: "web"}}
	objs := []runtime.Object{&appsv1.DaemonSet{ObjectMeta: ours}}
	for i := 0; i < 5; i++ {
		objs = append(objs, warning(fmt.Sprintf("w%d", i), "Pod", "web-x", "R", fmt.Sprint(i), now.Add(time.Duration(i)*time.Second)))
	}
	byEventTime := warning("et", "Pod", "web-y", "R", "event time", time.Time{})
	byEventTime.EventTime = metav1.NewMicroTime(now.Add(10 * time.Second))
	objs = append(objs, byEventTime)
	c := &Collector{Client: fake.NewSimpleClientset(objs...), Namespace: "ns", Release: "web", Since: now.Add(-time.Minute),
		Applied: func() []string { return []string{"DaemonSet/web"} }}
	var p Progress
	if err := c.Workloads(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	want := []string{"Pod/web-y: R: event time", "Pod/web-x: R: 4", "Pod/web-x: R: 3"}
	if len(p.Warnings) != MaxWarnings || p.Warnings[0] != want[0] || p.Warnings[1] != want[1] || p.Warnings[2] != want[2] {
		t.Errorf("warnings %q, want %q", p.Warnings, want)
	}
	if p.Total != 1 || p.Ready != 1 { // a DaemonSet with nothing to schedule is ready
		t.Errorf("ready %d/%d", p.Ready, p.Total)
	}
}

// A failed read is reported (the executor keeps the last counts).
func TestWorkloadsReadError(t *testing.T) {
	ours := func(n string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: n, Namespace: "ns", Annotations: map[string]string{releaseNameAnnotation: "web"}}
	}
	applied := []string{"Deployment/d", "StatefulSet/s", "DaemonSet/ds", "Job/j"}
	for _, resource := range []string{"deployments", "statefulsets", "daemonsets", "jobs", "events"} {
		cs := fake.NewSimpleClientset(&appsv1.Deployment{ObjectMeta: ours("d")}, &appsv1.StatefulSet{ObjectMeta: ours("s")},
			&appsv1.DaemonSet{ObjectMeta: ours("ds")}, &batchv1.Job{ObjectMeta: ours("j")})
		cs.PrependReactor("*", resource, func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, errors.New("forbidden")
		})
		c := &Collector{Client: cs, Namespace: "ns", Release: "web", Applied: func() []string { return applied }}
		if err := c.Workloads(context.Background(), &Progress{}); err == nil {
			t.Errorf("a failed read of %s went unnoticed", resource)
		}
	}
}
