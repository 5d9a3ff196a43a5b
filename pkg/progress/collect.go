package progress

import (
	"context"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
)

// releaseNameAnnotation is what Helm puts on every object it creates for a release.
const releaseNameAnnotation = "meta.helm.sh/release-name"

// MaxWarnings is how many of the latest Warning events are kept.
const MaxWarnings = 3

// Collector reads the release's workloads and Warning events, with the caller's rights.
type Collector struct {
	Client    kubernetes.Interface
	Namespace string
	Release   string
	// Since drops Warning events older than the action.
	Since time.Time
	// Ready, when set, judges a workload as the engine's wait does (Helm v4's kstatus);
	// nil keeps the rules below.
	Ready ReadyFunc
}

// ReadyFunc says whether a workload (its kind, the typed object) is ready.
type ReadyFunc func(kind string, obj runtime.Object) bool

// ready is c.Ready's answer, or rule without one.
func (c *Collector) ready(kind string, obj runtime.Object, rule func() bool) bool {
	if c.Ready != nil {
		return c.Ready(kind, obj)
	}
	return rule()
}

// Workloads fills Ready, Total and WaitingFor from the release's Deployments,
// StatefulSets, DaemonSets and Jobs, and Warnings from their events.
func (c *Collector) Workloads(ctx context.Context, p *Progress) error {
	var states []state
	deps, err := c.Client.AppsV1().Deployments(c.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list deployments: %w", err)
	}
	for i := range deps.Items {
		if d := &deps.Items[i]; c.ours(d.ObjectMeta) {
			states = append(states, state{"Deployment/" + d.Name, d.Name, c.ready("Deployment", d, func() bool { return deploymentReady(d) })})
		}
	}
	sts, err := c.Client.AppsV1().StatefulSets(c.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list statefulsets: %w", err)
	}
	for i := range sts.Items {
		if s := &sts.Items[i]; c.ours(s.ObjectMeta) {
			states = append(states, state{"StatefulSet/" + s.Name, s.Name, c.ready("StatefulSet", s, func() bool { return statefulSetReady(s) })})
		}
	}
	dss, err := c.Client.AppsV1().DaemonSets(c.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list daemonsets: %w", err)
	}
	for i := range dss.Items {
		if d := &dss.Items[i]; c.ours(d.ObjectMeta) {
			states = append(states, state{"DaemonSet/" + d.Name, d.Name, c.ready("DaemonSet", d, func() bool { return daemonSetReady(d) })})
		}
	}
	jobs, err := c.Client.BatchV1().Jobs(c.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list jobs: %w", err)
	}
	for i := range jobs.Items {
		if j := &jobs.Items[i]; c.ours(j.ObjectMeta) {
			states = append(states, state{"Job/" + j.Name, j.Name, c.ready("Job", j, func() bool { return jobDone(j) })})
		}
	}
	sort.Slice(states, func(i, j int) bool { return states[i].id < states[j].id })
	p.Ready, p.Total, p.WaitingFor = 0, len(states), nil
	for _, s := range states {
		if s.ready {
			p.Ready++
		} else {
			p.WaitingFor = append(p.WaitingFor, s.id)
		}
	}
	return c.warnings(ctx, states, p)
}

type state struct {
	id, name string
	ready    bool
}

func (c *Collector) ours(m metav1.ObjectMeta) bool {
	return m.Annotations[releaseNameAnnotation] == c.Release
}

// warnings keeps the latest Warning events of the workloads and of their pods (whose names
// start with the workload's).
func (c *Collector) warnings(ctx context.Context, states []state, p *Progress) error {
	evs, err := c.Client.CoreV1().Events(c.Namespace).List(ctx, metav1.ListOptions{FieldSelector: "type=" + corev1.EventTypeWarning})
	if err != nil {
		return fmt.Errorf("list warning events: %w", err)
	}
	type warn struct {
		at  time.Time
		msg string
	}
	var ws []warn
	for i := range evs.Items {
		e := &evs.Items[i]
		at := e.LastTimestamp.Time
		if at.IsZero() {
			at = e.EventTime.Time
		}
		if at.IsZero() {
			at = e.CreationTimestamp.Time
		}
		// Event times have whole seconds: compare at that precision.
		if at.Before(c.Since.Truncate(time.Second)) || !relatedTo(e.InvolvedObject.Name, states) {
			continue
		}
		ws = append(ws, warn{at, fmt.Sprintf("%s/%s: %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)})
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].at.After(ws[j].at) })
	p.Warnings = nil
	for i := 0; i < len(ws) && i < MaxWarnings; i++ {
		p.Warnings = append(p.Warnings, ws[i].msg)
	}
	return nil
}

func relatedTo(name string, states []state) bool {
	for _, s := range states {
		if name == s.name || (len(name) > len(s.name) && name[:len(s.name)+1] == s.name+"-") {
			return true
		}
	}
	return false
}

// deploymentReady is kubectl rollout status's rule: the controller saw the latest spec,
// every replica is updated and available (a Deployment mid-rollout is not ready).
func deploymentReady(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas >= want &&
		d.Status.AvailableReplicas >= want && d.Status.Replicas == d.Status.UpdatedReplicas
}

func statefulSetReady(s *appsv1.StatefulSet) bool {
	want := int32(1)
	if s.Spec.Replicas != nil {
		want = *s.Spec.Replicas
	}
	return s.Status.ObservedGeneration >= s.Generation && s.Status.ReadyReplicas >= want && s.Status.UpdatedReplicas >= want
}

func daemonSetReady(d *appsv1.DaemonSet) bool {
	return d.Status.ObservedGeneration >= d.Generation && d.Status.NumberReady >= d.Status.DesiredNumberScheduled &&
		d.Status.UpdatedNumberScheduled >= d.Status.DesiredNumberScheduled
}

func jobDone(j *batchv1.Job) bool {
	for _, c := range j.Status.Conditions {
		if c.Type == batchv1.JobComplete && c.Status == corev1.ConditionTrue {
			return true
		}
	}
	return false
}
