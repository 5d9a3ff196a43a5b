package progress

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
)

// releaseNameAnnotation is what Helm puts on every object it creates for a release.
const releaseNameAnnotation = "meta.helm.sh/release-name"

// Bounds of one read (a tenant's namespace may hold any number of objects of up to 1.5 MiB): the
// workloads Applied names, the latest MaxWarnings Warning events of at most eventPages pages of
// eventPage, each line cut at MaxLineBytes; all within ReadTimeout.
const (
	MaxWarnings, MaxLineBytes = 3, 256
	eventPage, eventPages     = 100, 5
	ReadTimeout               = 5 * time.Second
)

// Collector reads the release's workloads and Warning events, with the caller's rights.
type Collector struct {
	Client    kubernetes.Interface
	Namespace string
	Release   string
	// Applied names the workloads the action applied, each read by name (Phases.Workloads).
	Applied func() []string
	// Since drops Warning events older than the action.
	Since time.Time
	// Ready, when set, judges a workload as the engine's wait does; nil keeps the rules below.
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

// Workloads fills Ready, Total, WaitingFor and Warnings from the release's applied workloads.
func (c *Collector) Workloads(ctx context.Context, p *Progress) error {
	ctx, cancel := context.WithTimeout(ctx, ReadTimeout)
	defer cancel()
	var states []state
	for _, id := range c.Applied() {
		kind, name, _ := strings.Cut(id, "/")
		obj, m, rule, err := c.get(ctx, kind, name)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return fmt.Errorf("read %s: %w", id, err)
		case m.GetAnnotations()[releaseNameAnnotation] == c.Release:
			states = append(states, state{id, name, c.ready(kind, obj, rule)})
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

// get is one workload of kind, typed, and its readiness rule.
func (c *Collector) get(ctx context.Context, kind, name string) (runtime.Object, metav1.Object, func() bool, error) {
	o := metav1.GetOptions{}
	switch kind {
	case "Deployment":
		d, err := c.Client.AppsV1().Deployments(c.Namespace).Get(ctx, name, o)
		return d, d, func() bool { return deploymentReady(d) }, err
	case "StatefulSet":
		s, err := c.Client.AppsV1().StatefulSets(c.Namespace).Get(ctx, name, o)
		return s, s, func() bool { return statefulSetReady(s) }, err
	case "DaemonSet":
		d, err := c.Client.AppsV1().DaemonSets(c.Namespace).Get(ctx, name, o)
		return d, d, func() bool { return daemonSetReady(d) }, err
	case "Job":
		j, err := c.Client.BatchV1().Jobs(c.Namespace).Get(ctx, name, o)
		return j, j, func() bool { return jobDone(j) }, err
	}
	return nil, nil, nil, fmt.Errorf("%s is no workload", kind)
}

// warnings keeps the latest Warning events of the workloads and their pods, a few pages at most.
func (c *Collector) warnings(ctx context.Context, states []state, p *Progress) error {
	p.Warnings = nil
	if len(states) == 0 {
		return nil
	}
	type warn struct {
		at  time.Time
		msg string
	}
	var ws []warn
	opts := metav1.ListOptions{FieldSelector: "type=" + corev1.EventTypeWarning, Limit: eventPage}
	for page := 0; page < eventPages; page++ {
		evs, err := c.Client.CoreV1().Events(c.Namespace).List(ctx, opts)
		if err != nil {
			return fmt.Errorf("list warning events: %w", err)
		}
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
			msg := fmt.Sprintf("%s/%s: %s: %s", e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			if len(msg) > MaxLineBytes {
				msg = strings.ToValidUTF8(msg[:MaxLineBytes], "") + "…"
			}
			ws = append(ws, warn{at, msg})
		}
		if opts.Continue = evs.Continue; opts.Continue == "" {
			break
		}
	}
	sort.Slice(ws, func(i, j int) bool { return ws[i].at.After(ws[j].at) })
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
	want := ptr.Deref(d.Spec.Replicas, 1)
	return d.Status.ObservedGeneration >= d.Generation && d.Status.UpdatedReplicas >= want &&
		d.Status.AvailableReplicas >= want && d.Status.Replicas == d.Status.UpdatedReplicas
}

func statefulSetReady(s *appsv1.StatefulSet) bool {
	want := ptr.Deref(s.Spec.Replicas, 1)
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
