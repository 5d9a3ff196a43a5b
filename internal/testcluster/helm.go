package testcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
)

var helmRequire = regexp.MustCompile(`(?m)^\s*helm\.sh/helm/v3 (v\S+)`)

// HelmCLI returns the path of the helm CLI built from the version tools/localcluster/go.mod
// pins (the one the product's go.mod pins too), building it into .cache/bin on first use.
// Concurrent test binaries may both build it: each writes its own file and renames it.
func HelmCLI() (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	tools := filepath.Join(root, "tools", "localcluster")
	mod, err := os.ReadFile(filepath.Join(tools, "go.mod"))
	if err != nil {
		return "", err
	}
	m := helmRequire.FindSubmatch(mod)
	if m == nil {
		return "", fmt.Errorf("tools/localcluster/go.mod requires no helm.sh/helm/v3")
	}
	dir := filepath.Join(root, ".cache", "bin")
	bin := filepath.Join(dir, "helm-"+string(m[1]))
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.CreateTemp(dir, "helm-build-*")
	if err != nil {
		return "", err
	}
	_ = tmp.Close()
	defer os.Remove(tmp.Name())
	cmd := exec.Command("go", "build", "-o", tmp.Name(),
		"-ldflags", "-X helm.sh/helm/v3/internal/version.version="+string(m[1]), "helm.sh/helm/v3/cmd/helm")
	cmd.Dir = tools
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the helm CLI %s: %v\n%s", m[1], err, out)
	}
	if err := os.Rename(tmp.Name(), bin); err != nil {
		return "", err
	}
	return bin, nil
}
