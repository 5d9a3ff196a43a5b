package progress

import (
	"context"
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
)

// The log lines are Helm v3's own format strings, in the order Helm writes them, with the
// kube client's LogCreateHook/LogCreateRelease before each create (Helm logs both alike).
func TestPhasesFollowHelmsLog(t *testing.T) {
	type step struct {
		format string
		args   []any
		phase  string
		hook   string
	}
	const (
		create = "creating %d resource(s)"
		watch  = "Watching for changes to %s %s with timeout of %v"
		wait   = "beginning wait for %d resources with timeout of %v"
	)
	for _, tc := range []struct {
		name  string
		steps []step
	}{
		{"install with a pre-install hook, --wait and a post-install hook", []step{
			{"", nil, PhaseFetching, ""},
			{LogCreateHook, []any{1}, PhasePreHooks, ""},
			{create, []any{1}, PhasePreHooks, ""},
			{watch, []any{"Job", "shared-secrets", time.Minute}, PhasePreHooks, "Job/shared-secrets"},
			{"%s: Jobs active: %d, jobs failed: %d, jobs succeeded: %d", []any{"shared-secrets", 1, 0, 0}, PhasePreHooks, "Job/shared-secrets"},
			{LogCreateRelease, []any{12, Workloads("")}, PhaseApplying, ""},
			{wait, []any{12, time.Minute}, PhaseWaiting, ""},
			{"wait for resources succeeded within %v", []any{time.Second}, PhasePostHooks, ""},
			{LogCreateHook, []any{1}, PhasePostHooks, ""},
			{watch, []any{"Job", "smoke", time.Minute}, PhasePostHooks, "Job/smoke"},
		}},
		{"told by the kube client: hooks Helm does not watch (a ConfigMap) before the release", []step{
			{LogCreateHook, []any{1}, PhasePreHooks, ""},
			{create, []any{1}, PhasePreHooks, ""},
			{LogCreateHook, []any{1}, PhasePreHooks, ""},
			{create, []any{1}, PhasePreHooks, ""},
			{watch, []any{"Job", "upgrade-check", time.Minute}, PhasePreHooks, "Job/upgrade-check"},
			{LogCreateRelease, []any{12, Workloads("")}, PhaseApplying, ""},
			{create, []any{12}, PhaseApplying, ""},
			{LogCreateHook, []any{1}, PhasePostHooks, ""},
			{create, []any{1}, PhasePostHooks, ""},
		}},
		{"upgrade: a pre-upgrade hook, then checking for changes", []step{
			{LogCreateHook, []any{1}, PhasePreHooks, ""},
			{watch, []any{"Job", "upgrade-check", time.Minute}, PhasePreHooks, "Job/upgrade-check"},
			{"checking %d resources for changes", []any{3}, PhaseApplying, ""},
			{LogUpdateRelease, []any{3, Workloads("")}, PhaseApplying, ""},
			{LogCreateHook, []any{1}, PhasePostHooks, ""},
			{watch, []any{"Job", "smoke", time.Minute}, PhasePostHooks, "Job/smoke"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var seen []string
			p := NewPhases(func(f string, _ ...any) { seen = append(seen, f) })
			logged := 0
			for _, s := range tc.steps {
				if s.format != "" {
					p.Log(s.format, s.args...)
					logged++
				}
				if ph, h := p.Current(); ph != s.phase || h != s.hook {
					t.Errorf("after %q %v: %s/%s, want %s/%s", s.format, s.args, ph, h, s.phase, s.hook)
				}
			}
			if len(seen) != logged {
				t.Errorf("the next logger saw %d lines, want %d", len(seen), logged)
			}
		})
	}
}

func replicas(n int32) *int32 { return &n }

func TestCollectorCountsTheReleasesWorkloadsAndWarnings(t *testing.T) {
	ours := metav1.ObjectMeta{Namespace: "ns", Generation: 2, Annotations: map[string]string{"meta.helm.sh/release-name": "web"}}
	named := func(n string) metav1.ObjectMeta { m := *ours.DeepCopy(); m.Name = n; return m }
	now := time.Now()
	objs := []runtime.Object{
		&appsv1.Deployment{ObjectMeta: named("ready"), Spec: appsv1.DeploymentSpec{Replicas: replicas(2)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 2, UpdatedReplicas: 2, AvailableReplicas: 2}},
		// Mid-rollout: two available, but one of them is the old version.
		&appsv1.Deployment{ObjectMeta: named("rolling"), Spec: appsv1.DeploymentSpec{Replicas: replicas(2)},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 3, UpdatedReplicas: 1, AvailableReplicas: 2}},
		&appsv1.StatefulSet{ObjectMeta: named("gitaly"), Spec: appsv1.StatefulSetSpec{Replicas: replicas(1)},
			Status: appsv1.StatefulSetStatus{ObservedGeneration: 2, ReadyReplicas: 0, UpdatedReplicas: 1}},
		&batchv1.Job{ObjectMeta: named("migrate"), Status: batchv1.JobStatus{Conditions: []batchv1.JobCondition{
			{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}},
		// Another release's Deployment is not counted.
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "other", Namespace: "ns", Annotations: map[string]string{"meta.helm.sh/release-name": "db"}}},
		warning("e1", "Pod", "gitaly-0", "Unhealthy", "Readiness probe failed", now.Add(-time.Second)),
		warning("e2", "Pod", "rolling-5d9c-abcde", "BackOff", "Back-off restarting", now),
		warning("e3", "Pod", "other-1", "Unhealthy", "not ours", now),
		warning("e4", "Pod", "gitaly-0", "Unhealthy", "before the action", now.Add(-time.Hour)),
	}
	// The action applied the release's four, and names "other" (another release's now) and
	// "gone" (deleted since): neither is counted.
	applied := []string{"Deployment/ready", "Deployment/rolling", "StatefulSet/gitaly", "Job/migrate", "Deployment/other", "Deployment/gone"}
	c := &Collector{Client: fake.NewSimpleClientset(objs...), Namespace: "ns", Release: "web", Since: now.Add(-time.Minute),
		Applied: func() []string { return applied }}
	var p Progress
	if err := c.Workloads(context.Background(), &p); err != nil {
		t.Fatal(err)
	}
	if p.Ready != 2 || p.Total != 4 {
		t.Errorf("ready %d/%d, want 2/4", p.Ready, p.Total)
	}
	if want := []string{"Deployment/rolling", "StatefulSet/gitaly"}; !reflect.DeepEqual(p.WaitingFor, want) {
		t.Errorf("waiting for %v, want %v", p.WaitingFor, want)
	}
	want := []string{"Pod/rolling-5d9c-abcde: BackOff: Back-off restarting", "Pod/gitaly-0: Unhealthy: Readiness probe failed"}
	if !reflect.DeepEqual(p.Warnings, want) {
		t.Errorf("warnings %q, want %q", p.Warnings, want)
	}
}

func warning(name, kind, obj, reason, msg string, at time.Time) *corev1.Event {
	return &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}, Type: corev1.EventTypeWarning,
		InvolvedObject: corev1.ObjectReference{Kind: kind, Name: obj}, Reason: reason, Message: msg,
		LastTimestamp: metav1.NewTime(at)}
}

func TestEncodeDecodeAndSame(t *testing.T) {
	p := Progress{Phase: PhaseWaiting, Ready: 1, Total: 2, WaitingFor: []string{"Deployment/x"}, Updated: time.Now().UTC().Truncate(time.Second)}
	q, err := Decode(p.Encode())
	if err != nil || !reflect.DeepEqual(*q, p) {
		t.Fatalf("round trip: %+v %v", q, err)
	}
	q.Updated = q.Updated.Add(time.Hour)
	if !p.Same(*q) {
		t.Error("a newer time alone is not a change")
	}
	q.Ready = 2
	if p.Same(*q) {
		t.Error("a change of ready went unseen")
	}
	if none, err := Decode(""); none != nil || err != nil {
		t.Errorf("empty annotation: %v %v", none, err)
	}
}
