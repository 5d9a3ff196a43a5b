package helmexec

import "helm.sh/helm/v3/pkg/kube"

// FieldManager is the field manager of everything Helm applies for async-helm: the name the
// helm CLI applies with (Helm's default is the binary's name, "executor" here). Helm v4
// (its CLI, the console, Flux) moves a release from client-side to server-side apply by
// converting the managed fields of its own manager, "helm", and only of it: under any other
// name, the fields an async-helm upgrade changed would make a later
// `helm upgrade --server-side=true` fail with a conflict naming that manager
// (docs/design.md, "Two engines").
const FieldManager = "helm"

// Helm v3 reads the manager from a package variable only; set once, before any action runs.
func init() { kube.ManagedFieldsManager = FieldManager }
