// Package release is the release model of async-helm: names of Helm release
// secrets, statuses, and the reservation of a revision in Helm's own storage
// format (see docs/design.md, "The reservation contract").
package release

import (
	"errors"
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Labels Helm's Secrets driver puts on every release secret, plus ours.
const (
	LabelOwner     = "owner"
	LabelName      = "name"
	LabelStatus    = "status"
	LabelVersion   = "version"
	OwnerHelm      = "helm"
	LabelRequestID = "async-helm.io/request-id"
	// LabelChart is "<chart>-<version>", so watchers see the chart without decoding payloads.
	LabelChart = "async-helm.io/chart"
	// AnnotationNotified is the status the notifier last reported for a revision. Helm's
	// driver rewrites the whole secret on every status change, which drops it: a mismatch
	// (or absence) means an unreported transition.
	AnnotationNotified = "async-helm.io/notified"
	// SecretType is the type Helm 3 gives its release secrets.
	SecretType = "helm.sh/release.v1"
)

// SecretsResource is the resource Helm stores releases in.
var SecretsResource = schema.GroupVersionResource{Version: "v1", Resource: "secrets"}

// Action is what a request asks Helm to do.
type Action string

// Actions async-helm runs.
const (
	ActionInstall Action = "install"
	ActionUpgrade Action = "upgrade"
)

// PendingStatus is the status a reservation of this action carries.
func (a Action) PendingStatus() string {
	if a == ActionUpgrade {
		return "pending-upgrade"
	}
	return "pending-install"
}

// Sentinel errors; the HTTP edge maps them to status codes with errors.Is.
var (
	ErrNameInUse = errors.New("release name is in use")
	ErrNotFound  = errors.New("release not found")
	ErrPending   = errors.New("an operation is already pending on the release")
	ErrConflict  = errors.New("another request reserved this revision first")
)

// PendingError names the revision that blocks a new operation.
type PendingError struct {
	Revision int
	Status   string
}

func (e *PendingError) Error() string {
	return fmt.Sprintf("%s: revision %d is %s", ErrPending, e.Revision, e.Status)
}

// Is makes errors.Is(err, ErrPending) true.
func (e *PendingError) Is(target error) bool { return target == ErrPending }

// SecretName is the name of the secret that holds one revision of a release.
func SecretName(release string, revision int) string {
	return fmt.Sprintf("sh.helm.release.v1.%s.v%d", release, revision)
}

// IsPending reports whether a Helm status means an action is still running.
func IsPending(status string) bool {
	return status == "pending-install" || status == "pending-upgrade" || status == "pending-rollback"
}

// Revision is what the labels of one release secret say, without its payload.
type Revision struct {
	Namespace, Name, Status, RequestID, SecretName, Chart, Notified string
	Version                                                         int
	ResourceVersion                                                 string
}

// RevisionFromMeta reads a release secret's labels; ok is false for other secrets.
func RevisionFromMeta(m metav1.Object) (Revision, bool) {
	l := m.GetLabels()
	if l[LabelOwner] != OwnerHelm || l[LabelName] == "" {
		return Revision{}, false
	}
	v, err := strconv.Atoi(l[LabelVersion])
	if err != nil {
		return Revision{}, false
	}
	return Revision{
		Namespace: m.GetNamespace(), Name: l[LabelName], Status: l[LabelStatus], Version: v,
		RequestID: l[LabelRequestID], SecretName: m.GetName(), ResourceVersion: m.GetResourceVersion(),
		Chart: l[LabelChart], Notified: m.GetAnnotations()[AnnotationNotified],
	}, true
}

// ChartLabel is the value of LabelChart for a chart, or "" when it is not a valid label value.
func ChartLabel(name, version string) string {
	v := name + "-" + version
	if len(validation.IsValidLabelValue(v)) > 0 {
		return ""
	}
	return v
}

// Labels are the labels async-helm adds to the release secrets of one request.
func Labels(requestID, chartName, chartVersion string) map[string]string {
	l := map[string]string{LabelRequestID: requestID}
	if c := ChartLabel(chartName, chartVersion); c != "" {
		l[LabelChart] = c
	}
	return l
}
