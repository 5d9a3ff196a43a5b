package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// servingVersion is the Knative Serving release whose Service CRD is installed: the Triggers
// of config/knative name serving.knative.dev/v1 Services as subscribers.
const servingVersion = "v0.50.0"

// configFiles are the files of the eventing module zip that up applies (only the kinds in
// applyOrder are applied from them).
var configFiles = []string{
	"config/core/100-namespace.yaml",
	"config/core/200-eventing-serviceaccount.yaml",
	"config/core/resources/*.yaml",
	"config/core/configmaps/*.yaml",
	"config/channels/in-memory-channel/resources/*.yaml",
	"config/channels/in-memory-channel/configmaps/*.yaml",
	"config/channels/in-memory-channel/200-*.yaml",
	"config/brokers/mt-channel-broker/roles/*.yaml",
	"config/brokers/mt-channel-broker/deployments/broker-ingress.yaml",
	"config/brokers/mt-channel-broker/deployments/broker-filter.yaml",
	"config/channels/in-memory-channel/deployments/dispatcher.yaml",
	"config/channels/in-memory-channel/deployments/dispatcher-service.yaml",
}

// Eventing v0.50.0 is built against the product's client-go (tools/knative/go.mod pins the
// product's k8s.io versions, so the Go build cache compiles that stack once for both). Its
// ApiServerSource adapter implements client-go's cache.Store, which gained two methods after
// the client-go eventing was released with; ApiServerSource is never used here, so they are
// no-ops.
const (
	adapterPkg   = "pkg/adapter/apiserver"
	adapterStore = `package apiserver

// Written by tools/knative (knative prepare): cache.Store methods of client-go >= v0.36.

func (*resourceDelegate) Bookmark(string)                      {}
func (*resourceDelegate) LastStoreSyncResourceVersion() string { return "" }
func (*controllerFilter) Bookmark(string)                      {}
func (*controllerFilter) LastStoreSyncResourceVersion() string { return "" }
`
)

// The dispatcher's listen ports are constants upstream; the overlay turns them into settings.
const (
	dispatcherPkg   = "pkg/reconciler/inmemorychannel/dispatcher"
	dispatcherConst = "\thttpPort      = 8080\n\thttpsPort     = 8443\n"
	dispatcherPorts = `package dispatcher

// Written by tools/knative (knative prepare): the ports the dispatcher listens on.

import (
	"os"
	"strconv"
)

var (
	httpPort  = portFromEnv("IMC_DISPATCHER_PORT", 8080)
	httpsPort = portFromEnv("IMC_DISPATCHER_PORT_HTTPS", 8443)
)

func portFromEnv(name string, def int) int {
	if p, err := strconv.Atoi(os.Getenv(name)); err == nil && p > 0 {
		return p
	}
	return def
}
`
)

// The InMemoryChannel controller compares its channel Service's spec with the one it would
// create by DeepEqual, and the API server's defaults (targetPort, sessionAffinity) always
// differ: every reconcile of a channel sent an Update that changed nothing. The overlay
// compares against the expected spec with those defaults filled in.
const (
	imcControllerPkg  = "pkg/reconciler/inmemorychannel/controller"
	imcServiceEqual   = "} else if !equality.Semantic.DeepEqual(svc.Spec, expected.Spec) {"
	imcServiceDefault = "} else if !equality.Semantic.DeepEqual(svc.Spec, withServiceDefaults(expected.Spec)) {"
	imcServiceSpec    = `package controller

// Written by tools/knative (knative prepare): the channel Service's spec as the API server
// stores it, so that an unchanged Service is not updated on every reconcile.

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func withServiceDefaults(spec corev1.ServiceSpec) corev1.ServiceSpec {
	spec = *spec.DeepCopy()
	if spec.SessionAffinity == "" {
		spec.SessionAffinity = corev1.ServiceAffinityNone
	}
	for i, p := range spec.Ports {
		if p.Protocol == "" {
			spec.Ports[i].Protocol = corev1.ProtocolTCP
		}
		if p.TargetPort == (intstr.IntOrString{}) {
			spec.Ports[i].TargetPort = intstr.FromInt32(p.Port)
		}
	}
	return spec
}
`
)

// prepare runs in tools/knative: it finds the eventing and serving module directories in the
// module cache, copies the YAML up applies into dir/config and writes dir/overlay.json for
// the build (dir/go.work).
func prepare(ctx context.Context, dir string) error {
	evDir, err := goOut(ctx, "list", "-m", "-f", "{{.Dir}}", "knative.dev/eventing")
	if err != nil {
		return err
	}
	var dl struct{ Dir, Error string }
	out, err := goOut(ctx, "mod", "download", "-json", "knative.dev/serving@"+servingVersion)
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(out), &dl); err != nil || dl.Dir == "" {
		return fmt.Errorf("go mod download knative.dev/serving@%s: %s %v", servingVersion, dl.Error, err)
	}
	cfg := filepath.Join(dir, "config")
	if err := os.RemoveAll(cfg); err != nil {
		return err
	}
	if err := os.MkdirAll(cfg, 0o755); err != nil {
		return err
	}
	copyTo := func(prefix, src string) error {
		b, err := os.ReadFile(src)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(cfg, prefix+filepath.Base(src)), b, 0o644)
	}
	for _, pattern := range configFiles {
		files, err := filepath.Glob(filepath.Join(evDir, pattern))
		if err != nil || len(files) == 0 {
			return fmt.Errorf("eventing module: no %s (%v)", pattern, err)
		}
		prefix := "eventing-" + strings.ReplaceAll(filepath.Dir(pattern), "/", "-") + "-"
		for _, f := range files {
			if err := copyTo(prefix, f); err != nil {
				return err
			}
		}
	}
	if err := copyTo("serving-", filepath.Join(dl.Dir, "config/core/300-resources/service.yaml")); err != nil {
		return err
	}

	// Files under GOMODCACHE cannot be overlaid, so the build uses a copy of the module with
	// the one file changed, through a workspace of its own (dir/go.work).
	src := filepath.Join(dir, "src", "eventing")
	if err := copyTree(evDir, src); err != nil {
		return err
	}
	ctl := filepath.Join(src, dispatcherPkg, "controller.go")
	b, err := os.ReadFile(ctl)
	if err != nil {
		return err
	}
	if !bytes.Contains(b, []byte(dispatcherConst)) {
		return fmt.Errorf("%s: the port constants changed; update tools/knative/prepare.go", ctl)
	}
	if err := os.WriteFile(ctl, bytes.Replace(b, []byte(dispatcherConst), nil, 1), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, dispatcherPkg, "zz_ports.go"), []byte(dispatcherPorts), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, adapterPkg, "zz_store.go"), []byte(adapterStore), 0o644); err != nil {
		return err
	}
	if err := replaceOnce(filepath.Join(src, imcControllerPkg, "inmemorychannel.go"), imcServiceEqual, imcServiceDefault); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, imcControllerPkg, "zz_servicespec.go"), []byte(imcServiceSpec), 0o644); err != nil {
		return err
	}
	mod, err := os.Getwd()
	if err != nil {
		return err
	}
	work := fmt.Sprintf("go 1.26.0\n\nuse %s\n\nreplace knative.dev/eventing v0.50.0 => ./src/eventing\n", mod)
	return os.WriteFile(filepath.Join(dir, "go.work"), []byte(work), 0o644)
}

// replaceOnce replaces the one occurrence of old in the file.
func replaceOnce(file, old, new string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	if bytes.Count(b, []byte(old)) != 1 {
		return fmt.Errorf("%s: %q is not there once; update tools/knative/prepare.go", file, old)
	}
	return os.WriteFile(file, bytes.Replace(b, []byte(old), []byte(new), 1), 0o644)
}

// copyTree copies a module directory (read-only in the module cache) to a writable dst.
func copyTree(from, to string) error {
	if err := os.RemoveAll(to); err != nil {
		return err
	}
	return filepath.WalkDir(from, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, path)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		if !d.Type().IsRegular() || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
}

func goOut(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return strings.TrimSpace(string(out)), nil
}
