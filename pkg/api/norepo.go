package api

import (
	"fmt"

	chartref "github.com/async-helm/async-helm/pkg/chart/ref"
)

// validateNoRepo: a noRepo chart is a chart_url the console accepts (oci://, http(s)://*.tgz); the
// Secret is named as one, or NoneSecret on an upgrade, which then names the chart.
func (r *ReleaseRequest) validateNoRepo(install bool) error {
	if r.NoRepo && r.ChartURL == "" {
		return fmt.Errorf("noRepo needs chart_url")
	}
	if err := chartref.CheckAuthSecret(r.BasicAuthSecretName, !install); err != nil {
		return err
	}
	if r.BasicAuthSecretName != "" && r.BasicAuthSecretName != chartref.NoneSecret && r.IndexEntry != "" {
		return fmt.Errorf("basic_auth_secret_name goes with a chart named by chart_url, not by indexEntry (a repository's own credentials fetch its charts)")
	}
	if r.BasicAuthSecretName == chartref.NoneSecret && r.ChartURL == "" {
		return fmt.Errorf("basic_auth_secret_name %q clears the Secret of a chart fetched again: name the chart by chart_url (an upgrade without one reuses the deployed chart as it is)", chartref.NoneSecret)
	}
	return nil
}

// VerifyRequest is the console's body of POST /api/helm/verify (HelmVerifierRequest);
// values.provider is the verifier profile's vendor type.
type VerifyRequest struct {
	ChartURL string         `json:"chart_url"`
	Values   map[string]any `json:"values"`
}

// Validate is the console's rule since OCPBUGS-90080: oci:// or an http(s) archive URL.
func (r *VerifyRequest) Validate() error {
	return chartref.CheckArchiveURL(r.ChartURL)
}

// VerifyInvalidURL is the console's answer (400) to a chart URL Validate refuses.
const VerifyInvalidURL = "invalid chart URL: must be oci:// or http(s)://*.tgz"
