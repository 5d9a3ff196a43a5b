package knative

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"

	"github.com/async-helm/async-helm/internal/eventing"
	"github.com/async-helm/async-helm/internal/knativeapply"
	"github.com/async-helm/async-helm/internal/testcluster"
)

// imageReport is what tools/ko/cmd/kolocal writes (its Report type): the images as the
// loopback registry serves them after the push.
type imageReport struct {
	Base         string
	BuildSeconds float64
	Images       []struct {
		Name              string
		Ref               string
		Digest            string
		CompressedBytes   int64
		UncompressedBytes int64
		Entrypoint        []string
		Cmd               []string
		User              string
		Env               []string
		Annotations       map[string]string
		Files             map[string]struct {
			Mode int64
			Size int64
			Dir  bool
		}
		Passwd string
	}
}

// A node pulls at most this much per function (Helm and client-go make the executor the
// biggest): the images hold one static binary and a few files.
const maxImageBytes = 60 << 20

// kolocal builds the images with ko into the loopback registry (make ko-tools builds ko and
// kolocal in their own module, cached under .cache/ko) and returns the resolved manifests
// and the report. kocache is ko's cache of linked binaries (KOCACHE); manifests is ko
// resolve's -f (a directory or one file).
func kolocal(t *testing.T, ctx context.Context, root, registry, kocache, manifests string) ([]byte, imageReport) {
	t.Helper()
	dir := t.TempDir()
	out, report := filepath.Join(dir, "async-helm.yaml"), filepath.Join(dir, "images.json")
	bin := filepath.Join(root, ".cache", "ko", "bin")
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "kolocal"), "-registry", registry, "-ko", filepath.Join(bin, "ko"),
		"-storage", filepath.Join(root, ".cache", "ko", "registry"), "-kocache", kocache,
		"-f", manifests, "-out", out, "-report", report)
	cmd.Dir = root
	var logs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Run(); err != nil {
		t.Fatalf("kolocal: %v\n%s", err, logs.String())
	}
	t.Logf("kolocal:\n%s", lastLines(logs.String(), 6))
	resolved, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	var rep imageReport
	if err := json.Unmarshal(raw, &rep); err != nil {
		t.Fatalf("report: %v", err)
	}
	return resolved, rep
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// The whole of make deploy-local, checked: ko builds the three functions (twice: the
// digests must not change), each image starts its function's binary as a non-root user
// with CA certificates and nothing the manifests set baked in, every ko:// reference
// resolves to a digest, and the resolved manifests apply server-side to a cluster with
// the Knative CRDs. ko compiles with the Makefile's build settings (CGO_ENABLED=0,
// -trimpath), so under make test it reuses what vet and the other tests compiled; run
// alone on a cold cache it compiles everything the functions import: -timeout 40m.
func TestDeployLocalBuildsResolvesAndApplies(t *testing.T) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Minute)
	defer cancel()
	if deadline, ok := t.Deadline(); ok {
		ctx, cancel = context.WithDeadline(ctx, deadline.Add(-time.Minute))
		defer cancel()
	}
	mk := exec.CommandContext(ctx, "make", "-s", "ko-tools")
	mk.Dir = root
	if out, err := mk.CombinedOutput(); err != nil {
		t.Fatalf("make ko-tools: %v\n%s", err, out)
	}
	registry := os.Getenv("DEPLOY_LOCAL_REGISTRY")
	if registry == "" {
		registry = "127.0.0.1:5870"
	}

	// The first build keeps its linked binaries where make deploy-local does (an unchanged
	// function is not linked again); the second starts from an empty KOCACHE, so the binary
	// is linked and compressed again and must come out byte for byte the same. The three
	// functions build alike: the second build makes one (the notifier's), not three links
	// and compressions again in CI's last minutes.
	kocache := filepath.Join(root, ".cache", "ko", "kocache")
	resolved, rep := kolocal(t, ctx, root, registry, kocache, "config/knative")
	t.Logf("first build: %.0f s", rep.BuildSeconds)
	for _, fn := range []string{"submit", "executor", "notifier"} {
		// Where ko builds with KOCACHE: the next go build finds the binary up to date.
		bin := filepath.Join(kocache, "bin", "github.com/async-helm/async-helm/functions/"+fn, "linux", "amd64", "out")
		if _, err := os.Stat(bin); err != nil {
			t.Errorf("%s: ko did not keep its binary in KOCACHE: %v", fn, err)
		}
	}
	_, again := kolocal(t, ctx, root, registry, t.TempDir(), "config/knative/520-notifier.yaml")
	t.Logf("second build of the notifier (linked again): %.0f s", again.BuildSeconds)
	if len(again.Images) != 1 {
		t.Fatalf("second build: %d images, want the notifier's", len(again.Images))
	}
	first := map[string]string{}
	for _, im := range rep.Images {
		first[im.Name] = im.Digest
	}
	if im := again.Images[0]; first[im.Name] == "" || im.Digest != first[im.Name] {
		t.Errorf("%s is not reproducible: %q then %q", im.Name, first[im.Name], im.Digest)
	}

	objs, err := knativeapply.Decode(bytes.NewReader(resolved))
	if err != nil {
		t.Fatalf("resolved manifests: %v", err)
	}
	if bytes.Contains(resolved, []byte("ko://")) {
		t.Errorf("a ko:// reference is left in the resolved manifests")
	}
	// What each function's manifest sets: its image and the env names it gives the container.
	type setting struct {
		image string
		env   map[string]bool
	}
	settings := map[string]setting{}
	sourceImages := 0
	for _, u := range manifests(t) {
		if u.GetKind() == "Service" && u.GetAPIVersion() == "serving.knative.dev/v1" {
			sourceImages++
		}
	}
	configKeys := map[string]bool{"EVENT_SIGNING_KEY": true}
	for _, u := range objs {
		if u.GetKind() == "ConfigMap" && u.GetName() == "async-helm" {
			data, _, _ := unstructured.NestedStringMap(u.Object, "data")
			for k := range data {
				configKeys[k] = true
			}
		}
	}
	for _, u := range objs {
		if u.GetKind() != "Service" || u.GetAPIVersion() != "serving.knative.dev/v1" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
		if len(containers) != 1 {
			t.Fatalf("Service %s: %d containers", u.GetName(), len(containers))
		}
		c := containers[0].(map[string]any)
		s := setting{image: fmt.Sprint(c["image"]), env: map[string]bool{}}
		envFrom, _, _ := unstructured.NestedSlice(c, "envFrom")
		var sources []string
		for _, e := range envFrom {
			m := e.(map[string]any)
			if n, _, _ := unstructured.NestedString(m, "configMapRef", "name"); n != "" {
				sources = append(sources, "configmap/"+n)
			}
			if n, _, _ := unstructured.NestedString(m, "secretRef", "name"); n != "" {
				sources = append(sources, "secret/"+n)
			}
		}
		if strings.Join(sources, ",") != "configmap/async-helm,secret/async-helm-events" {
			t.Errorf("Service %s takes its env from %v, want the ConfigMap async-helm and the Secret async-helm-events", u.GetName(), sources)
		}
		for k := range configKeys {
			s.env[k] = true
		}
		env, _, _ := unstructured.NestedSlice(c, "env")
		for _, e := range env {
			s.env[fmt.Sprint(e.(map[string]any)["name"])] = true
		}
		settings[u.GetName()] = s
	}
	if len(settings) != 3 || sourceImages != 3 {
		t.Fatalf("resolved %d Knative Services of %d, want submit, executor, notifier", len(settings), sourceImages)
	}
	if !settings["notifier"].env["WATCH"] {
		t.Errorf("the notifier's manifest does not set WATCH")
	}

	digestRef := regexp.MustCompile(`^` + regexp.QuoteMeta(registry) + `/async-helm/([a-z]+)@(sha256:[0-9a-f]{64})$`)
	if len(rep.Images) != 3 {
		t.Fatalf("%d images in the report, want 3", len(rep.Images))
	}
	for _, img := range rep.Images {
		s, ok := settings[img.Name]
		if !ok {
			t.Errorf("image %s is used by no Knative Service", img.Name)
			continue
		}
		if m := digestRef.FindStringSubmatch(s.image); m == nil || m[1] != img.Name || m[2] != img.Digest || s.image != img.Ref {
			t.Errorf("Service %s runs %q, want %s/async-helm/%s@%s", img.Name, s.image, registry, img.Name, img.Digest)
		}
		entry := "/ko-app/" + img.Name
		if len(img.Entrypoint) != 1 || img.Entrypoint[0] != entry || len(img.Cmd) != 0 {
			t.Errorf("%s: entrypoint %q cmd %q, want [%s]", img.Name, img.Entrypoint, img.Cmd, entry)
		}
		if f, ok := img.Files[strings.TrimPrefix(entry, "/")]; !ok || f.Dir || f.Mode&0o111 == 0 || f.Size < 1<<20 {
			t.Errorf("%s: %s in the image: %+v (present %v), want an executable binary", img.Name, entry, f, ok)
		}
		uid, err := strconv.Atoi(strings.SplitN(img.User, ":", 2)[0])
		if err != nil || uid == 0 {
			t.Errorf("%s: user %q, want a numeric non-root uid (runAsNonRoot admits only those)", img.Name, img.User)
		} else if !regexp.MustCompile(`(?m)^[a-z]+:x:` + strconv.Itoa(uid) + `:`).MatchString(img.Passwd) {
			t.Errorf("%s: uid %d has no /etc/passwd entry:\n%s", img.Name, uid, img.Passwd)
		}
		imageEnv := map[string]string{}
		for _, e := range img.Env {
			k, v, _ := strings.Cut(e, "=")
			imageEnv[k] = v
		}
		if cert := imageEnv["SSL_CERT_FILE"]; cert == "" || img.Files[strings.TrimPrefix(cert, "/")].Size == 0 {
			t.Errorf("%s: SSL_CERT_FILE %q is not a CA bundle in the image", img.Name, cert)
		}
		// The manifests are the only source of settings: the image bakes none of them in.
		for k := range imageEnv {
			if s.env[k] {
				t.Errorf("%s: the image sets %s, which its manifest sets", img.Name, k)
			}
		}
		if img.Annotations["org.opencontainers.image.base.name"] == "" || !strings.HasSuffix(rep.Base, "@"+img.Annotations["org.opencontainers.image.base.digest"]) {
			t.Errorf("%s: base annotations %v, want the local base %s", img.Name, img.Annotations, rep.Base)
		}
		if img.CompressedBytes > maxImageBytes {
			t.Errorf("%s: %d bytes to pull, want at most %d", img.Name, img.CompressedBytes, maxImageBytes)
		}
		t.Logf("%s %s: %.1f MB compressed, %.1f MB unpacked", img.Name, img.Digest, float64(img.CompressedBytes)/1e6, float64(img.UncompressedBytes)/1e6)
	}

	// Applied as make deploy-local applies it; whatever the test applied goes afterwards.
	a, err := knativeapply.NewApplier(cluster.Admin, "async-helm-deploy-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { removeApplied(t, a, objs) })
	for _, u := range objs {
		knativeapply.WebhookDefaults(u) // the local cluster runs Eventing without its webhook
	}
	if _, err := knativeapply.Deploy(ctx, cluster.Admin, objs, "async-helm-deploy-test"); err != nil {
		t.Fatalf("apply: %v", err)
	}
	kinds := map[string]int{}
	for _, u := range objs {
		ri, err := a.Resource(u)
		if err != nil {
			t.Fatal(err)
		}
		got, err := ri.Get(ctx, u.GetName(), metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s %s/%s after apply: %v", u.GetKind(), u.GetNamespace(), u.GetName(), err)
			continue
		}
		kinds[u.GetKind()]++
		if u.GetKind() == "Service" && u.GetAPIVersion() == "serving.knative.dev/v1" {
			containers, _, _ := unstructured.NestedSlice(got.Object, "spec", "template", "spec", "containers")
			if len(containers) != 1 || containers[0].(map[string]any)["image"] != settings[u.GetName()].image {
				t.Errorf("Service %s in the cluster runs %v, want %s", u.GetName(), containers, settings[u.GetName()].image)
			}
		}
	}
	if kinds["Service"] != 3 || kinds["Broker"] != 1 || kinds["Trigger"] != 1 || kinds["SinkBinding"] != 2 {
		t.Errorf("in the cluster: %v, want 3 Services, 1 Broker, 1 Trigger (the executor's), 2 SinkBindings", kinds)
	}
	reconciled(t, ctx, objs)
	key, err := cluster.Client.CoreV1().Secrets("async-helm").Get(ctx, "async-helm-events", metav1.GetOptions{})
	if err != nil || len(key.Data["EVENT_SIGNING_KEY"]) < 32 {
		t.Errorf("signing key Secret: %v (key of %d bytes), want 32 bytes or more", err, len(key.Data["EVENT_SIGNING_KEY"]))
	}
}

// make runs every go command with the settings of ko's image builds (CGO_ENABLED=0,
// -trimpath), so the Go build cache compiles each package once for vet, the tests, the
// tools and the images; the GOFLAGS a caller sets are kept.
func TestMakeBuildsWithKoSettings(t *testing.T) {
	root, err := testcluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("make", "-s", "go-env")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "GOFLAGS=-mod=readonly")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make go-env: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		t.Fatalf("make go-env printed %q, want CGO_ENABLED and GOFLAGS", out)
	}
	if lines[0] != "0" {
		t.Errorf("CGO_ENABLED=%q under make, want 0 as ko builds", lines[0])
	}
	flags := strings.Fields(lines[1])
	if !slices.Contains(flags, "-trimpath") || !slices.Contains(flags, "-mod=readonly") {
		t.Errorf("GOFLAGS=%q under make, want -trimpath (as ko builds) and the caller's -mod=readonly", lines[1])
	}
}

// reconciled checks that Knative Eventing's own controllers (make cluster-up runs them)
// reconcile the deployed Broker and Triggers to Ready: the Broker gets its channel and
// address, each Trigger its subscription to its subscriber and its dead-letter sink. The
// local cluster has no Knative Serving, so the test writes what Serving would into each
// Service's status: its cluster-local URL.
func reconciled(t *testing.T, ctx context.Context, objs []*unstructured.Unstructured) {
	t.Helper()
	dyn, err := dynamic.NewForConfig(cluster.Admin)
	if err != nil {
		t.Fatal(err)
	}
	var broker string
	var triggers []string
	for _, u := range objs {
		switch {
		case u.GetKind() == "Service" && u.GetAPIVersion() == "serving.knative.dev/v1":
			addr := fmt.Sprintf("http://%s.%s.svc.cluster.local", u.GetName(), u.GetNamespace())
			patch := fmt.Sprintf(`{"status":{"url":%q,"address":{"url":%q},"conditions":[{"type":"Ready","status":"True","lastTransitionTime":%q}]}}`,
				addr, addr, time.Now().UTC().Format(time.RFC3339))
			if _, err := dyn.Resource(eventing.ServiceGVR).Namespace(u.GetNamespace()).Patch(ctx, u.GetName(), types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status"); err != nil {
				t.Fatalf("Service %s status: %v", u.GetName(), err)
			}
		case u.GetKind() == "Broker":
			broker = u.GetName()
		case u.GetKind() == "Trigger":
			triggers = append(triggers, u.GetName())
		}
	}
	t0 := time.Now()
	deadline := t0.Add(2 * time.Minute)
	b := waitReady(t, ctx, dyn.Resource(eventing.BrokerGVR).Namespace("async-helm"), broker, deadline)
	if addr, _, _ := unstructured.NestedString(b.Object, "status", "address", "url"); !strings.HasPrefix(addr, "http://") {
		t.Errorf("Broker %s is Ready with address %q", broker, addr)
	}
	for _, name := range triggers {
		tr := waitReady(t, ctx, dyn.Resource(eventing.TriggerGVR).Namespace("async-helm"), name, deadline)
		sub, _, _ := unstructured.NestedString(tr.Object, "status", "subscriberUri")
		if !strings.HasPrefix(sub, "http://") || !strings.Contains(sub, ".async-helm.svc.cluster.local") {
			t.Errorf("Trigger %s is Ready with subscriber %q, want a Service of async-helm", name, sub)
		}
	}
	t.Logf("Knative Eventing reconciled the Broker and %d Triggers to Ready in %s", len(triggers), time.Since(t0).Round(time.Millisecond))
}

// waitReady polls until the object's Ready condition is True; on the deadline it fails
// with the conditions that are not.
func waitReady(t *testing.T, ctx context.Context, ri dynamic.ResourceInterface, name string, deadline time.Time) *unstructured.Unstructured {
	t.Helper()
	for {
		u, err := ri.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
		var missing []string
		for _, c := range conds {
			m, _ := c.(map[string]any)
			if m["type"] == "Ready" && m["status"] == "True" {
				return u
			}
			if m["status"] != "True" {
				missing = append(missing, fmt.Sprintf("%v=%v %v: %v", m["type"], m["status"], m["reason"], m["message"]))
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %s not Ready: %v", u.GetKind(), name, missing)
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// shared are the kinds removeApplied leaves: the namespace async-helm and the functions'
// ServiceAccounts and RBAC (100-namespace.yaml, 300-rbac.yaml). Other test packages apply
// the same objects and run beside this one on the same cluster: e2e's ServiceAccount test
// runs its executor with exactly these rights, and lost them mid-test when this cleanup
// deleted them ("cannot patch resource leases ... in the namespace async-helm").
var shared = map[string]bool{"Namespace": true, "ServiceAccount": true, "Role": true,
	"RoleBinding": true, "ClusterRole": true, "ClusterRoleBinding": true}

// removeApplied deletes what the deploy test alone applied: not the shared kinds, nor the CRDs.
func removeApplied(t *testing.T, a *knativeapply.Applier, objs []*unstructured.Unstructured) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for i := len(objs) - 1; i >= 0; i-- {
		u := objs[i]
		if shared[u.GetKind()] {
			continue
		}
		ri, err := a.Resource(u)
		if err != nil {
			t.Errorf("cleanup: %v", err)
			continue
		}
		if err := ri.Delete(ctx, u.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("cleanup %s %s: %v", u.GetKind(), u.GetName(), err)
		}
	}
	err := cluster.Client.CoreV1().Secrets("async-helm").Delete(ctx, "async-helm-events", metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("cleanup signing key: %v", err)
	}
}
