package helmexec

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// Under v4 a workload is ready for progress when kstatus says Current, as for the wait.
func TestV4ProgressReadsKstatus(t *testing.T) {
	f, err := NewFactory(&rest.Config{Host: "http://127.0.0.1:1"}, WithEngine(EngineV4))
	if err != nil {
		t.Fatal(err)
	}
	ready := f.Readiness()
	one := int32(1)
	dep := func(available int32) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 2}, Spec: appsv1.DeploymentSpec{Replicas: &one},
			Status: appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: available, AvailableReplicas: available,
				Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable"},
					{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue}}}}
	}
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "migrate"},
		Status: batchv1.JobStatus{Succeeded: 1, Conditions: []batchv1.JobCondition{{Type: batchv1.JobComplete, Status: corev1.ConditionTrue}}}}
	for name, c := range map[string]struct {
		kind string
		obj  runtime.Object
		want bool
	}{
		"available deployment":   {"Deployment", dep(1), true},
		"unavailable deployment": {"Deployment", dep(0), false},
		"complete job":           {"Job", job, true},
		"running job":            {"Job", &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Name: "migrate"}, Status: batchv1.JobStatus{Active: 1}}, false},
	} {
		if got := ready(c.kind, c.obj); got != c.want {
			t.Errorf("%s: ready %v, want %v", name, got, c.want)
		}
	}
	if v3, _ := NewFactory(&rest.Config{Host: "http://127.0.0.1:1"}); v3.Readiness() != nil {
		t.Error("the v3 engine keeps progress's own rules")
	}
}
