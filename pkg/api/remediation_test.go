package api

import (
	"errors"
	"testing"
)

func TestValidateRemediation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		install bool
		edit    func(*ReleaseRequest)
		bad     bool
	}{
		{"none", true, func(r *ReleaseRequest) {}, false},
		{"install retries and uninstall", true, func(r *ReleaseRequest) { r.Retries, r.Remediation = 3, RemediationUninstall }, false},
		{"upgrade rollback", false, func(r *ReleaseRequest) { r.Remediation = RemediationRollback }, false},
		{"retries at the bound", false, func(r *ReleaseRequest) { r.Retries = MaxRetries }, false},
		{"retries above the bound", false, func(r *ReleaseRequest) { r.Retries = MaxRetries + 1 }, true},
		{"negative retries", true, func(r *ReleaseRequest) { r.Retries = -1 }, true},
		{"unknown strategy", false, func(r *ReleaseRequest) { r.Remediation = "reinstall" }, true},
		{"rollback on an install", true, func(r *ReleaseRequest) { r.Remediation = RemediationRollback }, true},
		{"atomic with retries", false, func(r *ReleaseRequest) { r.Atomic, r.Retries = true, 1 }, true},
		{"atomic with remediation", false, func(r *ReleaseRequest) { r.Atomic, r.Remediation = true, RemediationRollback }, true},
		{"atomic alone", false, func(r *ReleaseRequest) { r.Atomic = true }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := ReleaseRequest{Name: "web", Namespace: "team", ChartURL: "https://charts.example.com/web-1.0.0.tgz"}
			tc.edit(&r)
			err := r.Validate(tc.install)
			if tc.bad != errors.Is(err, ErrRemediation) || (!tc.bad && err != nil) {
				t.Fatalf("Validate = %v, want invalid=%v", err, tc.bad)
			}
		})
	}
}
