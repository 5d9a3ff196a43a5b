package helmexec

import (
	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/async-helm/async-helm/pkg/progress"
)

// Readiness is how the executor's live progress judges a workload ready: the v3 engine
// keeps progress's own rules (Helm v3's readiness), the v4 engine kstatus's Current, the
// status its watcher waits for.
func (f *Factory) Readiness() progress.ReadyFunc {
	if !f.v4() {
		return nil
	}
	return kstatusReady
}

// workloadGroups are the API versions of the kinds progress reads.
var workloadGroups = map[string]string{"Deployment": "apps/v1", "StatefulSet": "apps/v1", "DaemonSet": "apps/v1", "Job": "batch/v1"}

func kstatusReady(kind string, obj runtime.Object) bool {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return false
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetKind(kind) // typed lists leave their items without kind and apiVersion
	u.SetAPIVersion(workloadGroups[kind])
	res, err := status.Compute(u)
	return err == nil && res.Status == status.CurrentStatus
}
