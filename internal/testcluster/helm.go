package testcluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
)

// HelmCLI returns the path of the helm CLI built from the version tools/localcluster/go.mod
// pins (the one the product's go.mod pins too), building it into .cache/bin on first use.
// Concurrent test binaries may both build it: each writes its own file and renames it.
func HelmCLI() (string, error) { return helmCLI("localcluster", "v3") }

// HelmV4CLI is HelmCLI for Helm v4: the version tools/helmv4/go.mod pins (`make helm4`
// builds the same file).
func HelmV4CLI() (string, error) { return helmCLI("helmv4", "v4") }

// helmCLI builds helm.sh/helm/<major>/cmd/helm in the tools module under tools/<module>.
func helmCLI(module, major string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	tools := filepath.Join(root, "tools", module)
	mod, err := os.ReadFile(filepath.Join(tools, "go.mod"))
	if err != nil {
		return "", err
	}
	helm := "helm.sh/helm/" + major
	m := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(helm) + ` (v\S+)`).FindSubmatch(mod)
	if m == nil {
		return "", fmt.Errorf("tools/%s/go.mod requires no %s", module, helm)
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
		"-ldflags", "-X "+helm+"/internal/version.version="+string(m[1]), helm+"/cmd/helm")
	cmd.Dir = tools
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build the helm CLI %s: %v\n%s", m[1], err, out)
	}
	if err := os.Rename(tmp.Name(), bin); err != nil {
		return "", err
	}
	return bin, nil
}
