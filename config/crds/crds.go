// Package crds holds the CustomResourceDefinitions async-helm reads but does not own: the
// OpenShift console's chart repositories (helm.openshift.io/v1beta1 HelmChartRepository and
// ProjectHelmChartRepository). OpenShift serves them already; the local cluster and the
// tests install them from here (knativeapply.InstallRepositoryCRDs).
package crds

import "embed"

// Files are the CRDs, one YAML file each.
//
//go:embed *.yaml
var Files embed.FS
