// Package clustertest holds helmexec's tests and benchmarks against a real API server
// (internal/testcluster). They live apart from package helmexec so that its unit tests
// stay in `make test-unit`, which leaves out every package that imports testcluster.
package clustertest
