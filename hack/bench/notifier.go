package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/async-helm/async-helm/internal/localstack"
	"github.com/async-helm/async-helm/internal/testcluster"
	"github.com/async-helm/async-helm/pkg/notifier"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
	"github.com/async-helm/async-helm/pkg/signing"
)

// notifierSection: -notifier-releases release records of -payload-kib each (pending-install,
// already reported), the notifier watching them; then Helm's full-secret rewrites (Helm's
// Secrets driver Update: the whole object replaced, annotations gone) moving them to
// deployed, every -failed-every-th to failed (the failed path reads the reason), at
// -change-rate per second. Latency runs from each rewrite's scheduled time to the event at
// the sink; the floor is a plain watch of the same secrets in this process.
func (b *bench) notifierSection(ctx context.Context) error {
	const sec = "notifier"
	ns, cleanup, err := b.namespace(ctx, "notifier")
	if err != nil {
		return err
	}
	defer cleanup()
	manifest := make([]byte, b.o.payloadKiB<<10*3/4)
	if _, err := rand.Read(manifest); err != nil {
		return err
	}
	big := base64.StdEncoding.EncodeToString(manifest) // ~payload KiB once gzip+base64 (random does not compress)
	rec := func(name, status, desc string) *helmrelease.Release {
		now := helmtime.Now()
		// The labels submit's reservation gives and Helm keeps on every rewrite.
		return &helmrelease.Release{Name: name, Namespace: ns, Version: 1, Manifest: big, Config: map[string]any{"message": "bench"},
			Labels: release.Labels("req-"+name, 1, "tiny", "0.1.0"),
			Info:   &helmrelease.Info{FirstDeployed: now, LastDeployed: now, Status: helmrelease.Status(status), Description: desc}}
	}
	// Encode with Helm's own driver, capturing instead of sending.
	capture := &capturingSecrets{}
	enc := storage.NewSecrets(capture)
	if err := enc.Create(release.SecretName("r0", 1), rec("r0", "pending-install", release.ReservedDescription)); err != nil {
		return err
	}
	tmpl := capture.last
	t0 := time.Now()
	secrets := b.cl.Typed.CoreV1().Secrets(ns)
	if err := parallel(b.o.notifierReleases, 16, func(i int) error {
		s := tmpl.DeepCopy()
		name := fmt.Sprintf("r%d", i)
		s.Name, s.Labels[release.LabelName] = release.SecretName(name, 1), name
		created, err := secrets.Create(ctx, s, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		return b.markReported(ctx, secrets, created)
	}); err != nil {
		return fmt.Errorf("create release records: %w", err)
	}
	b.logf("  %d records of %d KiB written in %s", b.o.notifierReleases, len(tmpl.Data["release"])>>10, time.Since(t0).Round(time.Second))

	var mu sync.Mutex
	got := map[string]time.Time{}
	s, err := newSink(func(r *http.Request, _ []byte) {
		at := time.Now()
		mu.Lock()
		if _, ok := got[r.Header.Get("Ce-Id")]; !ok {
			got[r.Header.Get("Ce-Id")] = at
		}
		mu.Unlock()
	})
	if err != nil {
		return err
	}
	defer s.close()
	election := localstack.NotifierLease(ns)
	defer b.deleteElectionLease(election) // deferred before p.Stop: runs once the notifier stopped
	p, err := b.start("notifier", 0, "K_SINK="+s.url, "NAMESPACES="+ns, "SWEEP_INTERVAL=1h", "REDRIVE_AFTER=1h", "REAPER_GRACE=1h",
		"LEADER_ELECTION_NAME="+election)
	if err != nil {
		return err
	}
	defer p.Stop()
	rss0, _ := procMem(p.Pid())

	// The floor: a watch of the same secrets (metadata only) in this process.
	seen := map[string]time.Time{}
	w, err := b.cl.Metadata.Resource(release.SecretsResource).Namespace(ns).Watch(ctx, metav1.ListOptions{LabelSelector: release.SelectorReleaseSecrets})
	if err != nil {
		return err
	}
	defer w.Stop()
	go func() {
		for ev := range w.ResultChan() {
			at := time.Now()
			if ev.Type != watch.Modified {
				continue
			}
			m, ok := ev.Object.(*metav1.PartialObjectMetadata)
			if !ok {
				continue
			}
			key := m.Labels[release.LabelName] + "/" + m.Labels[release.LabelStatus]
			mu.Lock()
			if _, ok := seen[key]; !ok {
				seen[key] = at
			}
			mu.Unlock()
		}
	}()

	// -repeats rounds, each rewriting records of its own; the p99 verdict is the median round's.
	n := min(b.o.changes, b.o.notifierReleases/max(1, b.o.repeats))
	var all, failed, floor, own []sample
	p99s := &repeated{}
	for rep := 0; rep < b.o.repeats; rep++ {
		ra, rf, rfl, ro, err := b.notifierRound(ctx, notifierRound{enc: enc, capture: capture, rec: rec, secrets: secrets, ns: ns,
			from: rep * n, n: n, mu: &mu, got: got, seen: seen})
		if err != nil {
			return err
		}
		all, failed, floor, own = append(all, ra...), append(failed, rf...), append(floor, rfl...), append(own, ro...)
		x, y := summarize(ra, 0), summarize(rfl, 0)
		p99s.add(p99ms(x), p99ms(y))
		b.logf("  notifier round %d: p99 %s, watch p99 %s", rep+1, msF(x.p99), msF(y.p99))
	}
	mu.Lock()
	besides := len(got) - len(all)
	mu.Unlock()
	b.info(sec, "status events at the sink besides the rounds' (a start-up backlog, duplicates)", figure{float64(max(besides, 0)), "events"},
		"0: the records' signed marks say they were reported")
	rss, hwm := procMem(p.Pid())
	a, f, fl := summarize(all, 0), summarize(failed, 0), summarize(floor, 0)
	name := fmt.Sprintf("status event after a full-secret rewrite, %d/s", b.o.changeRate)
	b.compare(sec, name+": p50", msF(a.p50), "watch p50", msF(fl.p50), "", nil, a.note())
	b.compareRepeated(sec, name+": p99 (failed path included)", p99s, "ms", "watch p99", "<= 1.2x", atMost(1.2), "")
	b.compare(sec, name+": p99 of the failed path", msF(f.p99), "watch p99", msF(fl.p99), "", nil, f.note())
	o := summarize(own, 0)
	b.info(sec, name+": the notifier's own part (event after the watch saw the rewrite) p50 / p99", msF(o.p50), fmt.Sprintf("p99 %s", msF(o.p99)))
	total := int64(b.o.notifierReleases) * int64(len(tmpl.Data["release"]))
	b.info(sec, fmt.Sprintf("notifier RSS watching %d releases of %d KiB", b.o.notifierReleases, len(tmpl.Data["release"])>>10), mibF(rss),
		fmt.Sprintf("%d MiB after start, peak %d MiB; the records hold %d MiB", rss0>>20, hwm>>20, total>>20))
	return nil
}

// markReported marks a record's status reported as the notifier does (the mark and its
// signature over the record's UID): a mark without a valid signature is no mark, and the
// notifier would report every record at its start, beside the rounds.
func (b *bench) markReported(ctx context.Context, secrets typedcorev1.SecretInterface, s *corev1.Secret) error {
	rev, ok := release.RevisionFromMeta(s)
	if !ok {
		return fmt.Errorf("%s is not a release record", s.Name)
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{
		release.AnnotationNotified: rev.Status, release.AnnotationNotifiedSig: notifier.MarkSignature(signing.Key(b.key), rev)}}})
	if err != nil {
		return err
	}
	_, err = secrets.Patch(ctx, s.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	return err
}

// deleteElectionLease deletes a stopped notifier's election Lease: the bench leaves nothing
// of its own in async-helm's namespace.
func (b *bench) deleteElectionLease(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := b.cl.Typed.CoordinationV1().Leases(testcluster.OwnNamespace).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		b.logf("  election Lease %s left behind: %v", name, err)
	}
}

// capturingSecrets keeps the Secret Helm's driver would write instead of writing it.
type capturingSecrets struct {
	typedcorev1.SecretInterface
	last *corev1.Secret
}

func (c *capturingSecrets) Create(_ context.Context, s *corev1.Secret, _ metav1.CreateOptions) (*corev1.Secret, error) {
	c.last = s
	return s, nil
}

func (c *capturingSecrets) Update(_ context.Context, s *corev1.Secret, _ metav1.UpdateOptions) (*corev1.Secret, error) {
	c.last = s
	return s, nil
}
