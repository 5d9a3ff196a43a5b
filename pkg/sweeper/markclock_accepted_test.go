package sweeper

import (
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/async-helm/async-helm/pkg/release"
)

// remake deletes revision 1 of name and makes it again as a namespace editor can: same
// labels, seal and data (the signed stored event too), sent-at dated a century ahead so no
// re-send is ever due. The API server gives it a new creationTimestamp.
func (e *env) remake(name string) {
	e.t.Helper()
	secrets := e.c.CoreV1().Secrets("ns")
	secret := release.SecretName(name, 1)
	kept, err := secrets.Get(ctx(e.t), secret, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	if err := secrets.Delete(ctx(e.t), secret, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
	ann := map[string]string{release.AnnotationSentAt: e.clock.Now().Add(100 * 365 * 24 * time.Hour).Format(time.RFC3339Nano)}
	again := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: "ns", Labels: kept.Labels, Annotations: ann},
		Type: kept.Type, Data: kept.Data}
	if _, err := secrets.Create(ctx(e.t), again, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// restartNotifier replaces the sweeper with a new one (the notifier restarted, or a new
// leader): what it kept in memory is gone.
func (e *env) restartNotifier() {
	old := e.sw
	e.sw = &Sweeper{Store: old.Store, Redrive: old.Redrive, Log: old.Log, Clock: old.Clock,
		SigningKey: old.SigningKey, EventMaxAge: old.EventMaxAge, Config: old.Config}
}

// Attack (hostile-tenant review of the mark clock): the clock of a sealed pending revision
// was min(its creation, the sweeper's first sight), the first sight in the leader's memory.
// A tenant that deleted and made again its sealed queued reservation every 50 minutes, each
// time after the notifier restarted (or after its key fell out of the bounded history),
// got a fresh clock each time and held its MAX_QUEUED slot for ever. The clock now starts
// no later than the acceptance time submit signed in the stored event, which survives both.
func TestRemadeReservationAcrossRestartsIsFailedAtTheDeadlineFromAcceptance(t *testing.T) {
	e := newEnv(t)
	e.store.SealKey = signingKey
	e.Reserve("web", release.ActionInstall, 1)
	e.clock.Add(time.Minute) // the first pass sees it after its creation, as always
	failedAt := failedUnderRewrites(t, e, func() {
		if e.clock.Now().After(t0.Add(time.Minute)) {
			e.remake("web")
		}
		e.restartNotifier()
	})
	if failedAt < 0 {
		t.Fatalf("the reservation made again every 50 minutes across notifier restarts is still pending and queued after 3 h (QUEUE_DEADLINE %s): it holds its slot for ever",
			e.sw.Config.QueueDeadline)
	}
	if limit := e.sw.Config.QueueDeadline + 10*time.Minute; failedAt > limit {
		t.Errorf("failed %s after the reservation; want within %s of its acceptance", failedAt, limit)
	}
}

// The acceptance time costs one read of the Secret per sealed key, not one per pass, and
// none for a reservation that leaves the queue within acceptedReadAfter (most of them: at
// submit's rate a read per accepted request was one more API call per 201).
func TestAcceptedTimeIsReadOncePerKey(t *testing.T) {
	e := newEnv(t)
	e.store.SealKey = signingKey
	e.Reserve("web", release.ActionInstall, 1)
	gets := func() int {
		n := 0
		for _, a := range e.c.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "secrets" {
				n++
			}
		}
		return n
	}
	// Passes 30 s apart: pending for 0, 30, 60 and 90 s (before RedriveAfter, whose resend
	// reads the record too).
	for pass, want := range []int{0, 0, 1, 0} {
		before := gets()
		if _, err := e.sw.SweepOnce(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if n := gets() - before; n != want {
			t.Errorf("pass %d over a queued reservation with nothing due read its Secret %d times; want %d", pass, n, want)
		}
		e.clock.Add(30 * time.Second)
	}
}

// Attack (hostile-tenant review of the overdue failure): the sweeper decided on the record
// it read and wrote the failure only at that version, deciding again once: a tenant that
// rewrote its overdue queued reservation right after each of the sweeper's reads (faster
// than the round trip) had every failure write find another version, every pass, and kept
// its slot past QUEUE_DEADLINE. The sweep now reads, decides and writes again (bounded) until
// the write lands.
func TestOverdueFailureLandsThoughTheRecordIsRewrittenOnEveryRead(t *testing.T) {
	e := newEnv(t)
	e.store.SealKey = signingKey
	e.Reserve("web", release.ActionInstall, 1)
	if _, err := e.sw.SweepOnce(ctx(t)); err != nil { // the acceptance time, read before the race
		t.Fatal(err)
	}
	const rewritesPerPass = 4
	rewrites := 0
	secret := release.SecretName("web", 1)
	gvr := schema.GroupVersionResource{Version: "v1", Resource: "secrets"}
	e.c.PrependReactor("get", "secrets", func(a k8stesting.Action) (bool, runtime.Object, error) {
		if a.(k8stesting.GetAction).GetName() != secret || rewrites >= rewritesPerPass {
			return false, nil, nil
		}
		read, err := e.c.Tracker().Get(gvr, "ns", secret)
		if err != nil {
			return false, nil, nil
		}
		rewrites++ // the tenant's rewrite lands just after the sweeper's read
		again := read.DeepCopyObject().(*corev1.Secret)
		again.Annotations = map[string]string{"tenant": "again"}
		again.ResourceVersion += "0"
		if err := e.c.Tracker().Update(gvr, again, "ns"); err != nil {
			t.Error(err)
		}
		return true, read, nil
	})
	e.clock.Add(e.sw.Config.QueueDeadline + time.Minute)
	for range 3 {
		rewrites = 0
		if _, err := e.sw.SweepOnce(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if st, _ := e.Status("web", 1); st == helmrelease.StatusFailed {
			return
		}
		e.clock.Add(10 * time.Minute)
	}
	t.Fatalf("the overdue reservation rewritten after each of the sweeper's first %d reads of a pass is still pending after 3 passes past QUEUE_DEADLINE",
		rewritesPerPass)
}
