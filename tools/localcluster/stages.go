package main

import (
	"bytes"
	"fmt"
	"time"

	nodefast "sigs.k8s.io/kwok/kustomize/stage/node/fast"
	nodeheartbeat "sigs.k8s.io/kwok/kustomize/stage/node/heartbeat"
	podfast "sigs.k8s.io/kwok/kustomize/stage/pod/fast"
	"sigs.k8s.io/kwok/pkg/apis/v1alpha1"
	"sigs.k8s.io/yaml"
)

const (
	fastNode = "kwok-node-0"
	// slowNode carries a taint; only namespaces annotated by SlowNamespaceAnnotations
	// (PodNodeSelector + PodTolerationRestriction) schedule there, so the slow profile
	// is chosen per namespace and both profiles live in one cluster.
	slowNode  = "kwok-slow-0"
	slowTaint = "async-helm.io/slow"
	// gitlabNode runs the "gitlab" pod profile: GitLab's workloads become ready staggered,
	// as on a real cluster (gitlabProfile), so an install takes minutes and progress moves.
	gitlabNode = "kwok-gitlab-0"
	speedKey   = "async-helm.io/speed"
)

// stagesYAML builds kwok's Stage configuration from the stages kwok itself ships:
// nodes initialise and heartbeat, pods become Ready after readyDelay (slowDelay on the
// slow node), pods owned by Jobs complete, deleted pods go away.
func stagesYAML(readyDelay, slowDelay time.Duration) ([]byte, error) {
	var out bytes.Buffer
	add := func(s *v1alpha1.Stage) error {
		b, err := yaml.Marshal(s)
		if err != nil {
			return err
		}
		out.WriteString("---\n")
		out.Write(b)
		return nil
	}
	parse := func(src string) (*v1alpha1.Stage, error) {
		var s v1alpha1.Stage
		if err := yaml.UnmarshalStrict([]byte(src), &s); err != nil {
			return nil, fmt.Errorf("parse kwok stage: %w", err)
		}
		return &s, nil
	}
	for _, src := range []string{nodefast.DefaultNodeInit, nodeheartbeat.DefaultNodeHeartbeat, podfast.DefaultPodDelete} {
		s, err := parse(src)
		if err != nil {
			return nil, err
		}
		if err := add(s); err != nil {
			return nil, err
		}
	}
	type ready struct {
		name  string
		match []v1alpha1.MatchExpression
		delay time.Duration
	}
	node := func(op v1alpha1.SelectorOperator, nodes ...string) v1alpha1.MatchExpression {
		return v1alpha1.MatchExpression{Key: ".spec.nodeName", Operator: op, Values: nodes}
	}
	readies := []ready{
		{"pod-ready", []v1alpha1.MatchExpression{node(v1alpha1.SelectorOpNotIn, slowNode, gitlabNode)}, readyDelay},
		{"pod-ready-slow", []v1alpha1.MatchExpression{node(v1alpha1.SelectorOpIn, slowNode)}, slowDelay},
	}
	var named []string
	for _, w := range gitlabProfile {
		readies = append(readies, ready{"pod-ready-gitlab-" + w.app, []v1alpha1.MatchExpression{node(v1alpha1.SelectorOpIn, gitlabNode),
			{Key: appLabel, Operator: v1alpha1.SelectorOpIn, Values: []string{w.app}}}, w.delay})
		named = append(named, w.app)
	}
	readies = append(readies, ready{"pod-ready-gitlab", []v1alpha1.MatchExpression{node(v1alpha1.SelectorOpIn, gitlabNode),
		{Key: appLabel, Operator: v1alpha1.SelectorOpNotIn, Values: named}}, gitlabOthers})
	for _, v := range readies {
		s, err := parse(podfast.DefaultPodReady)
		if err != nil {
			return nil, err
		}
		s.Name = v.name
		s.Spec.Selector.MatchExpressions = append(s.Spec.Selector.MatchExpressions, v.match...)
		s.Spec.Selector.MatchExpressions = append(s.Spec.Selector.MatchExpressions,
			v1alpha1.MatchExpression{Key: simulateKey, Operator: v1alpha1.SelectorOpNotIn, Values: []string{"stuck"}})
		ms := v.delay.Milliseconds()
		s.Spec.Delay = &v1alpha1.StageDelay{DurationMilliseconds: &ms}
		if err := add(s); err != nil {
			return nil, err
		}
	}
	// Job pods complete, unless annotated to fail (tests of failing hooks and Jobs).
	complete, err := parse(podfast.DefaultPodComplete)
	if err != nil {
		return nil, err
	}
	complete.Spec.Selector.MatchExpressions = append(complete.Spec.Selector.MatchExpressions,
		v1alpha1.MatchExpression{Key: simulateKey, Operator: v1alpha1.SelectorOpNotIn, Values: []string{"fail"}})
	if err := add(complete); err != nil {
		return nil, err
	}
	fail, err := parse(podfast.DefaultPodComplete)
	if err != nil {
		return nil, err
	}
	fail.Name = "pod-fail"
	fail.Spec.Selector.MatchExpressions = append(fail.Spec.Selector.MatchExpressions,
		v1alpha1.MatchExpression{Key: simulateKey, Operator: v1alpha1.SelectorOpIn, Values: []string{"fail"}})
	fail.Spec.Next.StatusTemplate = failedPodTemplate
	if err := add(fail); err != nil {
		return nil, err
	}
	// A pod annotated "stuck" runs but never becomes ready, and its readiness probe fails
	// with a Warning event, as a kubelet reports it (progress and cancel are shown on it).
	stuck, err := parse(podfast.DefaultPodReady)
	if err != nil {
		return nil, err
	}
	stuck.Name = "pod-stuck"
	stuck.Spec.Selector.MatchExpressions = []v1alpha1.MatchExpression{
		{Key: ".metadata.deletionTimestamp", Operator: v1alpha1.SelectorOpDoesNotExist},
		{Key: ".status.phase", Operator: v1alpha1.SelectorOpIn, Values: []string{"Pending"}},
		{Key: simulateKey, Operator: v1alpha1.SelectorOpIn, Values: []string{"stuck"}},
	}
	stuck.Spec.Next.StatusTemplate = stuckPodTemplate
	stuck.Spec.Next.Event = &v1alpha1.StageEvent{Type: "Warning", Reason: "Unhealthy",
		Message: "Readiness probe failed: connection refused (async-helm.io/simulate: stuck)"}
	if err := add(stuck); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// appLabel is the label GitLab's chart puts on each workload's pods.
const appLabel = `.metadata.labels.app`

// gitlabProfile is the "gitlab" pod profile (namespaces annotated as the test helper's
// GitLabNamespace does, or make demo's): when each of GitLab's workloads becomes ready.
// Job pods (the migrations, the shared-secrets hook) become ready, then complete. The
// webservice's "dependencies" init container waits for the migrations (30 s) before Puma
// boots (90 s): 120 s. With the pre-install hook (20 s) an install with --wait is pending
// for over 2 minutes, the story make demo tells.
var gitlabProfile = []struct {
	app   string
	delay time.Duration
}{
	{"migrations", 30 * time.Second},
	{"gitaly", 45 * time.Second},
	{"sidekiq", 60 * time.Second},
	{"webservice", 120 * time.Second},
}

// gitlabOthers is when the other pods of the profile become ready (hooks, toolbox, shell...).
const gitlabOthers = 20 * time.Second

const stuckPodTemplate = `{{ $now := Now }}
conditions:
- lastTransitionTime: {{ $now | Quote }}
  status: "True"
  type: Initialized
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  type: Ready
  reason: ContainersNotReady
- lastTransitionTime: {{ $now | Quote }}
  status: "False"
  type: ContainersReady
containerStatuses:
{{ range $index, $item := .spec.containers }}
- image: {{ $item.image | Quote }}
  name: {{ $item.name | Quote }}
  ready: false
  restartCount: 0
  started: true
  state:
    running:
      startedAt: {{ $now | Quote }}
{{ end }}
phase: Running
startTime: {{ $now | Quote }}
`

// simulateKey is the pod annotation async-helm.io/simulate: "fail" makes a Job's pod fail,
// "stuck" makes a pod run without ever becoming ready.
const simulateKey = `.metadata.annotations["async-helm.io/simulate"]`

const failedPodTemplate = `{{ $now := Now }}
containerStatuses:
{{ range $index, $item := .spec.containers }}
- image: {{ $item.image | Quote }}
  name: {{ $item.name | Quote }}
  ready: false
  restartCount: 0
  started: false
  state:
    terminated:
      exitCode: 1
      finishedAt: {{ $now | Quote }}
      reason: Error
      message: "failed on purpose (async-helm.io/simulate: fail)"
      startedAt: {{ $now | Quote }}
{{ end }}
phase: Failed
`
