package main

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The user the functions run as: not root, the uid distroless and Chainguard's static
// images use, so a cluster's runAsNonRoot admits it without a runAsUser.
const (
	nonRootUID = 65532
	certsPath  = "etc/ssl/certs/ca-certificates.crt"
)

// baseFiles is the whole base filesystem: a passwd/group entry for the non-root user, its
// home, a writable /tmp, the CA bundle for TLS to chart repositories and the API server,
// and nsswitch.conf so Go's resolver reads /etc/hosts first.
func baseFiles(caBundle []byte) []tarEntry {
	return []tarEntry{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, body: []byte(fmt.Sprintf(
			"root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", nonRootUID, nonRootUID))},
		{name: "etc/group", mode: 0o644, body: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", nonRootUID))},
		{name: "etc/nsswitch.conf", mode: 0o644, body: []byte("hosts: files dns\n")},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: certsPath, mode: 0o644, body: caBundle},
		{name: "home/", mode: 0o755, dir: true},
		{name: "home/nonroot/", mode: 0o700, dir: true, uid: nonRootUID},
		{name: "tmp/", mode: 0o1777, dir: true},
	}
}

type tarEntry struct {
	name string
	mode int64
	dir  bool
	uid  int
	body []byte
}

// layerTar writes the entries with fixed times and owners: the same input gives the same
// bytes, hence the same layer digest.
func layerTar(entries []tarEntry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, ModTime: time.Unix(0, 0).UTC(), Format: tar.FormatPAX}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.body))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(e.body); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// baseImage is an OCI image of one layer, made here because no image can be pulled.
func baseImage(caBundle []byte) (v1.Image, error) {
	raw, err := layerTar(baseFiles(caBundle))
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(raw)), nil },
		tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("base layer: %w", err)
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.AppendLayers(img, layer)
	if err != nil {
		return nil, fmt.Errorf("base image: %w", err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", runtime.GOARCH
	cf.Config.User = fmt.Sprint(nonRootUID)
	cf.Config.WorkingDir = "/home/nonroot"
	cf.Config.Env = []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"SSL_CERT_FILE=/" + certsPath,
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	// Zero creation time: the digest depends on the content only.
	return mutate.CreatedAt(img, v1.Time{Time: time.Unix(0, 0).UTC()})
}

func pushBase(ctx context.Context, ref, caBundlePath string) (name.Digest, error) {
	ca, err := os.ReadFile(caBundlePath)
	if err != nil {
		return name.Digest{}, fmt.Errorf("CA certificates for the base image (install Debian's ca-certificates): %w", err)
	}
	img, err := baseImage(ca)
	if err != nil {
		return name.Digest{}, err
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		return name.Digest{}, err
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
		return name.Digest{}, fmt.Errorf("pushing the base image: %w", err)
	}
	d, err := img.Digest()
	if err != nil {
		return name.Digest{}, err
	}
	return tag.Context().Digest(d.String()), nil
}

// files lists the flattened filesystem of img and returns its /etc/passwd.
func files(img v1.Image) (map[string]File, string, int64, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	out := map[string]File{}
	var passwd string
	var total int64
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, "", 0, err
		}
		p := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		out[p] = File{Mode: h.Mode, Size: h.Size, UID: h.Uid, GID: h.Gid, Dir: h.Typeflag == tar.TypeDir}
		total += h.Size
		if p == "etc/passwd" {
			b, err := io.ReadAll(io.LimitReader(tr, 1<<20))
			if err != nil {
				return nil, "", 0, err
			}
			passwd = string(b)
		}
	}
	return out, passwd, total, nil
}
