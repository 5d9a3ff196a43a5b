// Package podprofile names the local cluster's pod profiles (tools/localcluster's kwok
// stages): the namespace annotations that schedule a namespace's pods on the kwok node of a
// profile, where they become Ready after that profile's delays. Tests and make demo choose a
// profile per namespace, so every profile lives in one cluster.
package podprofile

import "fmt"

// Profile is a pod profile of the local cluster.
type Profile string

const (
	// Fast: pods are Ready about half a second after they start (the default).
	Fast Profile = "fast"
	// Slow: pods become Ready after the slow delay (60 s; localcluster up -slow-delay).
	Slow Profile = "slow"
	// GitLab: GitLab's workloads become Ready staggered, as on a real cluster: migrations
	// 30 s, gitaly 45 s, sidekiq 60 s, webservice 120 s (it waits for the migrations, then
	// boots), every other pod 20 s. An install of GitLab 6.5.4 with --wait is pending for
	// over 2 minutes.
	GitLab Profile = "gitlab"
)

// Parse reads a profile name (make demo's DEMO_SPEED, say).
func Parse(s string) (Profile, error) {
	switch p := Profile(s); p {
	case Fast, Slow, GitLab:
		return p, nil
	}
	return "", fmt.Errorf("pod profile %q: want fast, slow or gitlab", s)
}

// Annotations put a namespace's pods on the profile: the PodNodeSelector and
// PodTolerationRestriction admission plugins give each pod the profile's node and the
// toleration of its taint. The fast profile needs none.
func (p Profile) Annotations() map[string]string {
	if p == Fast || p == "" {
		return map[string]string{}
	}
	return map[string]string{
		"scheduler.alpha.kubernetes.io/node-selector":      "async-helm.io/speed=" + string(p),
		"scheduler.alpha.kubernetes.io/defaultTolerations": `[{"key":"async-helm.io/slow","operator":"Exists","effect":"NoSchedule"}]`,
	}
}
