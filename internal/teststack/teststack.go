// Package teststack builds the product's commands and runs them as processes for
// end-to-end tests.
package teststack

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/async-helm/async-helm/internal/proc"
	"github.com/async-helm/async-helm/internal/testcluster"
)

// Binaries builds the product's commands once into dir and returns their paths by name.
func Binaries(dir string) (map[string]string, error) {
	return Build(dir, "submit", "executor", "notifier", "oc-helm")
}

// Build builds the named commands (functions, or oc-helm) into dir.
func Build(dir string, names ...string) (map[string]string, error) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		return nil, err
	}
	var pkgs []string
	for _, n := range names {
		if n == "oc-helm" {
			pkgs = append(pkgs, "./cmd/oc-helm")
		} else {
			pkgs = append(pkgs, "./functions/"+n)
		}
	}
	cmd := exec.Command("go", append([]string{"build", "-o", dir + "/"}, pkgs...)...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build: %v\n%s", err, out)
	}
	bins := map[string]string{}
	for _, n := range names {
		bins[n] = filepath.Join(dir, n)
	}
	return bins, nil
}

// Run starts a function binary with env and stops it when the test ends.
func Run(t testing.TB, bin string, env map[string]string) *proc.Process {
	t.Helper()
	return RunPort(t, bin, 0, env)
}

// RunPort is Run on a given port (0: a free one), for processes whose address Knative
// must know before they start.
func RunPort(t testing.TB, bin string, port int, env map[string]string) *proc.Process {
	t.Helper()
	keys := make([]string, 0, len(env))
	for k := range env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var kv []string
	for _, k := range keys {
		kv = append(kv, k+"="+env[k])
	}
	p, err := proc.Start(bin, port, filepath.Join(t.TempDir(), filepath.Base(bin)+".log"), kv...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	return p
}
