package api

import (
	"fmt"

	"helm.sh/helm/v3/pkg/chartutil"
	"k8s.io/apimachinery/pkg/util/validation"
)

// RollbackRequest is the console's rollback body (PATCH PathRelease, PathAsync) plus our options.
type RollbackRequest struct {
	Name      string `json:"name"`
	Namespace string `json:"namespace"`
	// Version is the revision to return to; 0 is Helm's "the one before the latest".
	Version int `json:"version"`

	Timeout     string `json:"timeout,omitempty"`
	Wait        bool   `json:"wait,omitempty"`
	WaitForJobs bool   `json:"wait_for_jobs,omitempty"`
	Description string `json:"description,omitempty"`
	// Supersede: a pending revision is cancelled and the rollback runs after it.
	Supersede bool `json:"supersede,omitempty"`
	// ServerSide and ForceConflicts: as ReleaseRequest's.
	ServerSide     ServerSide `json:"server_side,omitempty"`
	ForceConflicts bool       `json:"force_conflicts,omitempty"`
}

// Validate checks what can be checked without the cluster.
func (r *RollbackRequest) Validate() error {
	if err := ValidateRelease(r.Namespace, r.Name); err != nil {
		return err
	}
	if r.Version < 0 {
		return fmt.Errorf("version %d: want a revision number (0: the previous one)", r.Version)
	}
	_, err := (&ReleaseRequest{Timeout: r.Timeout}).ParsedTimeout()
	return err
}

// ValidateRelease checks a release name and its namespace.
func ValidateRelease(namespace, name string) error {
	if err := chartutil.ValidateReleaseName(name); err != nil {
		return fmt.Errorf("release name %q: %w", name, err)
	}
	if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
		return fmt.Errorf("namespace %q: %s", namespace, errs[0])
	}
	return nil
}
