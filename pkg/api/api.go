// Package api is the HTTP contract of submit: the OpenShift console's helm routes and
// shapes (request body, release secret answer, JSON errors), plus async-helm's options.
package api

import (
	"errors"
	"fmt"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/release"

	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
	"github.com/async-helm/async-helm/pkg/progress"
	"github.com/async-helm/async-helm/pkg/valuesfrom"
)

// Routes served by submit.
const (
	PathAsync   = "/api/helm/release/async" // POST install, PUT upgrade, DELETE uninstall, PATCH rollback
	PathRelease = "/api/helm/release"       // GET ?ns=&name=
	PathHistory = "/api/helm/release/history"
	PathList    = "/api/helm/releases"       // GET ?ns=&limitInfo=
	PathEvents  = "/api/helm/events"         // CloudEvents from pipelines
	PathCancel  = "/api/helm/release/cancel" // POST ?ns=&name=: stop the pending revision
)

// Chart routes served by submit, as the console's.
const (
	PathChartIndex = "/api/helm/charts/index.yaml" // GET ?namespace=&onlyCompatible=: the merged repository index
	PathChart      = "/api/helm/chart"             // GET ?url=|indexEntry=&namespace=&version=: one chart (metadata, values, schema)
	PathTemplate   = "/api/helm/template"          // POST a release request: the manifest an install would create
	PathVerify     = "/api/helm/verify"            // POST {chart_url, values}: Red Hat's chart-verifier report
)

// Release is a release as get and list answer it: Helm's fields plus a pending revision's progress.
type Release struct {
	*release.Release
	Progress *progress.Progress `json:"progress,omitempty"`
	// Queue: no executor has started the pending revision yet (queue.go).
	Queue *Queue `json:"queue,omitempty"`
}

// Cancelled answers a cancel: "failed" when nobody ran the revision yet, else "cancelling".
type Cancelled struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	Revision  int    `json:"revision"`
	Status    string `json:"status"`
}

// MaxBodyBytes bounds a request body (values included); larger bodies get 413.
const MaxBodyBytes = 2 << 20

// MaxEventBytes bounds a CloudEvent body: a request body plus the envelope and the
// signature an accepted event adds. Larger events get 413 on every event endpoint.
const MaxEventBytes = MaxBodyBytes + 256<<10

// DefaultTimeout is Helm's own default for an action.
const DefaultTimeout = 5 * time.Minute

// ReleaseRequest is the console's install/upgrade body plus async-helm's options.
type ReleaseRequest struct {
	Name         string `json:"name"`
	Namespace    string `json:"namespace"`
	ChartURL     string `json:"chart_url,omitempty"`
	ChartVersion string `json:"chart_version,omitempty"`
	IndexEntry   string `json:"indexEntry,omitempty"`
	Values       Values `json:"values,omitempty"`
	// NoRepo (the console's noRepo, on installs) names a chart by chart_url outside every
	// chart repository: oci:// or an http(s) archive URL (*.tgz, *.tar.gz).
	NoRepo bool `json:"noRepo,omitempty"`
	// BasicAuthSecretName names a Secret of Namespace (keys username, password) whose basic
	// auth fetches the chart, read for the caller; on installs it goes with NoRepo, an
	// upgrade reuses the one its release recorded, and NoneSecret clears it.
	BasicAuthSecretName string `json:"basic_auth_secret_name,omitempty"`

	// Timeout is a Go duration ("10m"); default 5m, as Helm's.
	Timeout     string `json:"timeout,omitempty"`
	Wait        bool   `json:"wait,omitempty"`
	WaitForJobs bool   `json:"wait_for_jobs,omitempty"`
	Atomic      bool   `json:"atomic,omitempty"`
	Description string `json:"description,omitempty"`
	// Supersede (upgrades): a pending revision is cancelled, this one runs after it (design.md).
	Supersede bool `json:"supersede,omitempty"`
	// Retries (0..MaxRetries) and Remediation (RemediationRollback, RemediationUninstall or
	// none) after a failed install or upgrade (docs/design.md, "Retries and remediation").
	Retries     int    `json:"retries,omitempty"`
	Remediation string `json:"remediation,omitempty"`
	// ServerSide and ForceConflicts: the apply method under the Helm v4 engine (applymethod.go).
	ServerSide     ServerSide `json:"server_side,omitempty"`
	ForceConflicts bool       `json:"force_conflicts,omitempty"`
	// ValuesFrom: values of Secrets and ConfigMaps of Namespace, merged in order before Values.
	ValuesFrom []valuesfrom.Ref `json:"values_from,omitempty"`
	// ReuseValues (upgrades): the last release's values, with this request's over them, and
	// its values_from references when the request names none.
	ReuseValues bool `json:"reuse_values,omitempty"`
}

// Chart is the chart reference the request names, with the basic auth Secret of a noRepo
// chart (an upgrade's is resolved against its release by the submitter).
func (r *ReleaseRequest) Chart() chartref.Ref {
	ref := chartref.Ref{URL: r.ChartURL, Version: r.ChartVersion, IndexEntry: r.IndexEntry, Namespace: r.Namespace, NoRepo: r.NoRepo}
	if r.NoRepo && r.BasicAuthSecretName != chartref.NoneSecret {
		ref.AuthSecret = r.BasicAuthSecretName
	}
	return ref
}

// ParsedTimeout is the action's timeout.
func (r *ReleaseRequest) ParsedTimeout() (time.Duration, error) {
	if r.Timeout == "" {
		return DefaultTimeout, nil
	}
	d, err := time.ParseDuration(r.Timeout)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("timeout %q: want a positive duration such as 10m", r.Timeout)
	}
	return d, nil
}

// Validate checks what can be checked without the cluster. needChart is true for installs.
func (r *ReleaseRequest) Validate(needChart bool) error {
	if err := ValidateRelease(r.Namespace, r.Name); err != nil {
		return err
	}
	if _, err := r.ParsedTimeout(); err != nil {
		return err
	}
	if needChart && r.ChartURL == "" && r.IndexEntry == "" {
		return fmt.Errorf("chart_url or indexEntry is required")
	}
	for _, check := range []func(install bool) error{r.validateNoRepo, r.validateSupersede, r.validateRemediation, r.validateValuesFrom} {
		if err := check(needChart); err != nil {
			return err
		}
	}
	if r.ChartURL != "" || r.IndexEntry != "" {
		if err := r.Chart().Validate(); err != nil {
			return err
		}
	}
	return nil
}

// ErrSupersedeInstall: an install has no pending revision to take the place of.
var ErrSupersedeInstall = errors.New("supersede applies to upgrades and rollbacks, not installs")

func (r *ReleaseRequest) validateSupersede(install bool) error {
	if install && r.Supersede {
		return ErrSupersedeInstall
	}
	return nil
}

// validateValuesFrom checks the references without the cluster; reuse_values is an upgrade's.
func (r *ReleaseRequest) validateValuesFrom(install bool) error {
	if install && r.ReuseValues {
		return errors.New("reuse_values is for upgrades: an install has no values to reuse")
	}
	return valuesfrom.Validate(r.ValuesFrom, r.Namespace)
}

// Error is the body of every error answer.
type Error struct {
	Error string `json:"error"`
}

// ReleaseInfo is a release as `limitInfo=true` lists it: no values, manifest or chart files.
type ReleaseInfo struct {
	Name      string        `json:"name"`
	Namespace string        `json:"namespace"`
	Version   int           `json:"version"`
	Info      *release.Info `json:"info,omitempty"`
	Chart     ChartInfo     `json:"chart"`
	// Queue: no executor has started the pending revision yet (queue.go).
	Queue *Queue `json:"queue,omitempty"`
}

// ChartInfo is the chart part of ReleaseInfo.
type ChartInfo struct {
	Metadata *chart.Metadata `json:"metadata,omitempty"`
}

// Limit trims a release to what limitInfo=true shows.
func Limit(r *release.Release) ReleaseInfo {
	out := ReleaseInfo{Name: r.Name, Namespace: r.Namespace, Version: r.Version, Info: r.Info}
	if r.Chart != nil {
		out.Chart.Metadata = r.Chart.Metadata
	}
	return out
}
