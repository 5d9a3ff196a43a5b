package submitter

import (
	"context"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

// sealedEnv is newEnv whose store seals and whose running index counts only sealed
// revisions, as submit's Start wires them, with a bound of perNS queued in namespace ns.
func sealedEnv(t *testing.T, perNS int) (*env, *release.RevisionIndex) {
	t.Helper()
	e := newEnv(t)
	e.store.SealKey = key
	idx, err := release.NewRevisionIndexWith(e.c.Metadata(), release.IndexOptions{SealKey: key})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	t.Cleanup(stop)
	if err := idx.Run(runCtx); err != nil {
		t.Fatal(err)
	}
	e.store.Revisions = idx
	e.svc.MaxQueuedPerNamespace = perNS
	return e, idx
}

// relabel merges labels into the Secret of revision 1 of name, as a namespace editor can,
// and waits until the index has seen the write.
func (e *env) relabel(idx *release.RevisionIndex, name string, labels map[string]string) {
	e.t.Helper()
	patch := `{"metadata":{"labels":{`
	sep := ""
	for k, v := range labels {
		patch += sep + `"` + k + `":"` + v + `"`
		sep = ","
	}
	patch += `}}}`
	sec, err := e.c.CoreV1().Secrets("ns").Patch(ctx(e.t), release.SecretName(name, 1), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		objs, _ := idx.ByIndex(release.ReleaseIndex, "ns/"+name)
		for _, o := range objs {
			if m, ok := o.(metav1.Object); ok && m.GetName() == sec.Name && m.GetResourceVersion() == sec.ResourceVersion {
				return
			}
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("the index never saw %s at resourceVersion %s", sec.Name, sec.ResourceVersion)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// The hostile review's open row (docs/security.md): a namespace editor at
// MAX_QUEUED_PER_NAMESPACE rewrites labels of its own sealed reservations, leaving their
// payloads pending (so an executor still runs them). Admission counted a queued revision
// only while its status label said pending and its revision label matched its version, so
// every relabelled reservation freed a slot and the editor was admitted past the bound.
// Only the queued label and the seal may decide the count.
func TestRelabelledReservationsStillCount(t *testing.T) {
	for _, c := range []struct {
		what   string
		labels map[string]string
	}{
		{"status label deployed", map[string]string{release.LabelStatus: "deployed"}},
		{"status label failed", map[string]string{release.LabelStatus: "failed"}},
		{"revision label", map[string]string{release.LabelRevision: "7"}},
		{"version label", map[string]string{release.LabelVersion: "x"}},
	} {
		t.Run(c.what, func(t *testing.T) {
			e, idx := sealedEnv(t, 2)
			for _, n := range []string{"a", "b"} {
				if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install(n), nil); err != nil {
					t.Fatal(err)
				}
			}
			waitQueued(t, idx, 2)
			for _, n := range []string{"a", "b"} {
				e.relabel(idx, n, c.labels)
			}
			if got, _ := idx.QueuedCount("ns"); got != 2 {
				t.Errorf("queued in ns after the relabel: %d, want 2", got)
			}
			_, err := e.svc.Submit(ctx(t), release.ActionInstall, install("c"), nil)
			if !errors.Is(err, ErrBusy) {
				t.Fatalf("a third install at a bound of 2, after the %s of both reservations was rewritten: %v, want 429", c.what, err)
			}
		})
	}
}

// What ends a reservation takes it out of the count: a cancel (failed before any executor
// ran it), Helm's adoption (a final record without our labels), an uninstall mark put back.
func TestFinishedReservationsDoNotCount(t *testing.T) {
	e, idx := sealedEnv(t, 2)
	e.svc.Heartbeat = &lease.Heartbeat{Client: e.c, Holder: "submit", Duration: time.Hour, Clock: e.svc.Clock}
	for _, n := range []string{"a", "b"} {
		if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install(n), nil); err != nil {
			t.Fatal(err)
		}
	}
	waitQueued(t, idx, 2)
	if out, err := e.svc.Cancel(ctx(t), "ns", "a", &auth.User{Name: "alice"}); err != nil || out.Status != "failed" {
		t.Fatalf("cancel: %+v, %v", out, err)
	}
	waitQueued(t, idx, 1)
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install("c"), nil); err != nil {
		t.Fatalf("a cancelled reservation still counted: %v", err)
	}
	waitQueued(t, idx, 2)
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, install("d"), nil); !errors.Is(err, ErrBusy) {
		t.Fatalf("two queued at a bound of 2: %v, want 429", err)
	}
}
