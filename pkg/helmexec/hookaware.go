package helmexec

import (
	"k8s.io/apimachinery/pkg/api/meta"

	"helm.sh/helm/v3/pkg/kube"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/progress"
)

// hookAwareClient is Helm's kube client that says, before each create, whether it creates
// a hook's resources or the release's own: Helm logs both as "creating N resource(s)", and
// a hook of a kind Helm does not watch (a ConfigMap, a ServiceAccount) is followed by no
// other line, so the log alone cannot tell the phases apart (progress.Phases reads these,
// and the release's workloads they name).
// Embedding the client keeps every optional interface Helm asserts (InterfaceExt, ...).
type hookAwareClient struct {
	*kube.Client
}

func (c hookAwareClient) Create(resources kube.ResourceList) (*kube.Result, error) {
	if c.Log != nil {
		if isHook(resources) {
			c.Log(progress.LogCreateHook, len(resources))
		} else {
			c.Log(progress.LogCreateRelease, len(resources), progress.WorkloadsOf(resources))
		}
	}
	return c.Client.Create(resources)
}

func (c hookAwareClient) Update(original, target kube.ResourceList, force bool) (*kube.Result, error) {
	if c.Log != nil {
		c.Log(progress.LogUpdateRelease, len(target), progress.WorkloadsOf(target))
	}
	return c.Client.Update(original, target, force)
}

// isHook: Helm creates each hook on its own, and a hook's manifest carries the annotation.
func isHook(resources kube.ResourceList) bool {
	for _, info := range resources {
		if info == nil || info.Object == nil {
			continue
		}
		m, err := meta.Accessor(info.Object)
		if err != nil {
			continue
		}
		if _, ok := m.GetAnnotations()[helmrelease.HookAnnotation]; ok {
			return true
		}
	}
	return false
}
