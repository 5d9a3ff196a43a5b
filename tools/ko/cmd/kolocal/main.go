// Command kolocal builds async-helm's images with ko into a registry it serves on loopback,
// on a base image it makes itself (no image can be pulled here), and resolves the Knative
// manifests to digests. It writes the resolved manifests and a JSON report of each image
// (digest, size, config, files) and prints the digests and sizes. `make deploy-local`
// applies the result to the local cluster; config/knative's deploy test checks the report.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/remote"
)

type options struct {
	registry   string // host:port on loopback
	storage    string // the registry's blobs, kept between runs
	ko         string // the ko binary
	kocache    string // ko's KOCACHE: built binaries and layer digests kept between runs
	manifests  string // ko resolve -f
	out        string // resolved manifests
	report     string // JSON report
	caBundle   string
	importRoot string
	timeout    time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.registry, "registry", "127.0.0.1:5870", "loopback address the registry listens on; ko records the base image's name (this address included) in each image, so a fixed port keeps digests reproducible")
	flag.StringVar(&o.storage, "storage", ".cache/ko/registry", "directory of the registry's blobs")
	flag.StringVar(&o.ko, "ko", ".cache/ko/bin/ko", "the ko binary")
	flag.StringVar(&o.kocache, "kocache", "", "ko's cache (KOCACHE) of built binaries and their layers' digests: an unchanged function is neither linked nor compressed again; empty: none, every run links and compresses")
	flag.StringVar(&o.manifests, "f", "config/knative", "manifests with ko:// images")
	flag.StringVar(&o.out, "out", ".cache/ko/async-helm.yaml", "where the resolved manifests go")
	flag.StringVar(&o.report, "report", ".cache/ko/images.json", "where the JSON report of the images goes")
	flag.StringVar(&o.caBundle, "ca-bundle", "/etc/ssl/certs/ca-certificates.crt", "CA certificates put in the base image (Debian's ca-certificates)")
	flag.DurationVar(&o.timeout, "timeout", 45*time.Minute, "bound of the whole run (a cold ko build of the three functions takes minutes)")
	flag.Parse()
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	if err := run(ctx, logger, o); err != nil {
		logger.Error("kolocal failed", "err", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, logger *slog.Logger, o options) error {
	host, _, err := net.SplitHostPort(o.registry)
	if err != nil {
		return fmt.Errorf("registry address %q: %w", o.registry, err)
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("registry address %q: only a loopback IP is served", o.registry)
	}
	if err := os.MkdirAll(o.storage, 0o755); err != nil {
		return fmt.Errorf("registry storage: %w", err)
	}
	ln, err := net.Listen("tcp", o.registry)
	if err != nil {
		return fmt.Errorf("registry on %s (set DEPLOY_LOCAL_REGISTRY to another loopback port): %w", o.registry, err)
	}
	srv := &http.Server{
		// Blobs on disk so a warm run re-pushes nothing; manifests live in memory for one run.
		Handler:           registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(o.storage)), registry.Logger(log.New(io.Discard, "", 0))),
		ReadHeaderTimeout: 30 * time.Second,
	}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	logger.Info("registry serving", "addr", o.registry, "storage", o.storage)

	base, err := pushBase(ctx, o.registry+"/async-helm/base:nonroot", o.caBundle)
	if err != nil {
		return err
	}
	logger.Info("base image pushed", "ref", base.String())

	start := time.Now()
	resolved, err := resolve(ctx, o, base)
	if err != nil {
		return err
	}
	buildTime := time.Since(start)
	logger.Info("ko resolve done", "took", buildTime.Round(time.Second).String())
	if err := os.MkdirAll(filepath.Dir(o.out), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(o.out, resolved, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", o.out, err)
	}

	refs, err := imageRefs(resolved)
	if err != nil {
		return err
	}
	rep := Report{Base: base.String(), BuildSeconds: buildTime.Seconds(), Manifests: o.out}
	for _, r := range refs {
		img, err := describe(ctx, r)
		if err != nil {
			return err
		}
		rep.Images = append(rep.Images, img)
	}
	raw, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(o.report, raw, 0o644); err != nil {
		return fmt.Errorf("writing %s: %w", o.report, err)
	}
	fmt.Printf("%-10s %-73s %9s\n", "IMAGE", "DIGEST", "SIZE")
	for _, img := range rep.Images {
		fmt.Printf("%-10s %-73s %6.1f MB\n", img.Name, img.Digest, float64(img.CompressedBytes)/1e6)
	}
	fmt.Printf("resolved manifests: %s, report: %s, ko build %s\n", o.out, o.report, buildTime.Round(time.Second))
	return nil
}

// resolve runs `ko resolve` on the manifests with the loopback registry and the local base.
func resolve(ctx context.Context, o options, base name.Digest) ([]byte, error) {
	cmd := exec.CommandContext(ctx, o.ko, "resolve",
		// Images named <repo>/<binary>: submit, executor, notifier.
		"--base-import-paths",
		// Nothing reads an SBOM here and generating one costs a `go version -m` per image.
		"--sbom=none",
		"-f", o.manifests)
	cmd.Env = append(environWithout("KOCACHE"),
		"KO_DOCKER_REPO="+o.registry+"/async-helm",
		"KO_DEFAULTBASEIMAGE="+base.String())
	if o.kocache != "" {
		// ko builds into KOCACHE/bin/<import path>/<platform>/out there, so go build finds
		// the binary up to date (same build ID) and skips the link.
		abs, err := filepath.Abs(o.kocache)
		if err != nil {
			return nil, fmt.Errorf("kocache %q: %w", o.kocache, err)
		}
		cmd.Env = append(cmd.Env, "KOCACHE="+abs)
	}
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ko resolve: %w", err)
	}
	return out, nil
}

// environWithout is this process's environment without the variable name: what kolocal
// sets is set by its flags alone.
func environWithout(name string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, name+"=") {
			env = append(env, kv)
		}
	}
	return env
}

// imageRefs finds every `image:` value of the resolved manifests, in order, once each.
func imageRefs(resolved []byte) ([]string, error) {
	var refs []string
	seen := map[string]bool{}
	for _, line := range strings.Split(string(resolved), "\n") {
		t := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "- "))
		v, ok := strings.CutPrefix(t, "image:")
		if !ok {
			continue
		}
		v = strings.Trim(strings.TrimSpace(v), `"'`)
		if !seen[v] {
			seen[v] = true
			refs = append(refs, v)
		}
	}
	if len(refs) == 0 {
		return nil, errors.New("no image in the resolved manifests")
	}
	return refs, nil
}

// Report is what kolocal found in the registry after the push.
type Report struct {
	Base         string
	BuildSeconds float64
	Manifests    string
	Images       []Image
}

// Image is one pushed image as the registry serves it.
type Image struct {
	Name   string // last path element of the repository
	Ref    string // as in the resolved manifests
	Digest string
	// CompressedBytes is what a node pulls: manifest, config and compressed layers.
	CompressedBytes int64
	// UncompressedBytes is the size of the layers once unpacked.
	UncompressedBytes int64
	Entrypoint        []string
	Cmd               []string
	User              string
	Env               []string
	WorkingDir        string
	Annotations       map[string]string
	// Files of the flattened filesystem, by path without the leading slash.
	Files map[string]File
	// Passwd is /etc/passwd of the image, to check that the user has an entry.
	Passwd string
}

// File is one entry of an image's filesystem.
type File struct {
	Mode int64
	Size int64
	UID  int
	GID  int
	Dir  bool
}

func describe(ctx context.Context, ref string) (Image, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return Image{}, fmt.Errorf("image %q: %w", ref, err)
	}
	img, err := remote.Image(r, remote.WithContext(ctx))
	if err != nil {
		return Image{}, fmt.Errorf("fetching %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return Image{}, err
	}
	m, err := img.Manifest()
	if err != nil {
		return Image{}, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return Image{}, err
	}
	raw, err := img.RawManifest()
	if err != nil {
		return Image{}, err
	}
	out := Image{
		Name:        filepath.Base(r.Context().RepositoryStr()),
		Ref:         ref,
		Digest:      d.String(),
		Entrypoint:  cf.Config.Entrypoint,
		Cmd:         cf.Config.Cmd,
		User:        cf.Config.User,
		Env:         cf.Config.Env,
		WorkingDir:  cf.Config.WorkingDir,
		Annotations: m.Annotations,
	}
	out.CompressedBytes = int64(len(raw)) + m.Config.Size
	for _, l := range m.Layers {
		out.CompressedBytes += l.Size
	}
	out.Files, out.Passwd, out.UncompressedBytes, err = files(img)
	if err != nil {
		return Image{}, fmt.Errorf("reading %s: %w", ref, err)
	}
	return out, nil
}
