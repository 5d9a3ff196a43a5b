package storage

import (
	"helm.sh/helm/v3/pkg/storage/driver"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// This file is the one door to Helm's storage driver: nothing outside pkg/release imports
// helm.sh/helm/v3/pkg/storage/driver.

// Driver is Helm's storage driver, the interface Helm's actions and our wrappers store through.
type Driver = driver.Driver

// Memory is Helm's in-memory driver, the storage of unit tests that run Helm's actions.
type Memory = driver.Memory

// Secrets is Helm's Secrets driver: records written exactly as Helm writes them.
type Secrets = driver.Secrets

// SecretsDriverName is the name Helm's Secrets driver reports (Driver.Name).
const SecretsDriverName = driver.SecretsDriverName

// ErrReleaseNotFound is Helm's own "not found" (the same value, so errors.Is matches what
// any driver answers).
var ErrReleaseNotFound = driver.ErrReleaseNotFound

// NewMemory is Helm's in-memory driver, for unit tests that run Helm's actions without Secrets.
func NewMemory() *Memory { return driver.NewMemory() }

// NewSecrets is Helm's Secrets driver over si, for code and tests that read or write a
// record exactly as Helm does.
func NewSecrets(si typedcorev1.SecretInterface) *Secrets { return driver.NewSecrets(si) }
