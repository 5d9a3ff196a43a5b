package release

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
)

// A held slot is a sealed record labelled queued whose status label is final; waiting
// reservations, unsealed copies and records not queued are not. The index and the API
// server's LIST say the same.
func TestHeldSlots(t *testing.T) {
	s, c, _ := newStore(t)
	s.SealKey = sealKey
	reserve(t, s, "waiting", ActionInstall, "req-w")
	reserve(t, s, "held", ActionInstall, "req-h")
	forgeQueued(t, s, "ns", "forged", "") // no seal: counts for nothing, holds nothing
	if _, err := c.CoreV1().Secrets("ns").Patch(ctx(t), SecretName("held", 1), types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"status":"deployed"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	x := running(t)(NewRevisionIndexWith(c.Metadata(), IndexOptions{SealKey: sealKey}))
	listed, err := s.HeldSlots(ctx(t), "ns")
	if err != nil {
		t.Fatal(err)
	}
	for from, got := range map[string][]HeldSlot{"index": x.HeldSlots(), "list": listed} {
		if len(got) != 1 || got[0].Namespace != "ns" || got[0].SecretName != SecretName("held", 1) || got[0].ResourceVersion == "" {
			t.Errorf("%s: held slots %+v; want ns/%s at its resourceVersion", from, got, SecretName("held", 1))
		}
	}
}

// A tenant who rewrites its held record between the sweeper's look and its write (faster
// than the index's lag: every pass sees a resourceVersion already gone) kept the slot for
// ever: UnqueueHeld wrote only the version it was given and answered false. It now reads
// the record again and decides on it as it is: still held, the label is dropped; turned
// back into a waiting reservation of ours, it is left to the sweeper.
func TestUnqueueHeldDecidesAgainOnARewrittenRecord(t *testing.T) {
	s, c, _ := newStore(t)
	s.SealKey = sealKey
	reserve(t, s, "held", ActionInstall, "req-h")
	reserve(t, s, "back", ActionInstall, "req-b")
	for _, name := range []string{"held", "back"} {
		relabel(t, c, name, `{"metadata":{"labels":{"status":"deployed"}}}`)
	}
	slots, err := s.HeldSlots(ctx(t), "ns")
	if err != nil || len(slots) != 2 {
		t.Fatalf("held slots %+v, %v", slots, err)
	}
	// The tenant's rewrites, after the look: one stays held, one is a waiting reservation again.
	relabel(t, c, "held", `{"metadata":{"annotations":{"tenant":"again"}}}`)
	relabel(t, c, "back", `{"metadata":{"labels":{"status":"pending-install"}}}`)
	for _, h := range slots {
		dropped, err := s.UnqueueHeld(ctx(t), h)
		if err != nil {
			t.Fatal(err)
		}
		sec, err := c.CoreV1().Secrets("ns").Get(ctx(t), h.SecretName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		queued := sec.Labels[LabelQueued] == "true"
		switch h.SecretName {
		case SecretName("held", 1):
			if !dropped || queued {
				t.Errorf("a held slot rewritten since it was seen: dropped %v, still queued %v; want its queued label dropped", dropped, queued)
			}
		default:
			if dropped || !queued {
				t.Errorf("a record rewritten back to a waiting reservation: dropped %v, still queued %v; want it left alone", dropped, queued)
			}
		}
	}
}

func relabel(t *testing.T, c interface {
	CoreV1() corev1client.CoreV1Interface
}, name, patch string) {
	t.Helper()
	if _, err := c.CoreV1().Secrets("ns").Patch(ctx(t), SecretName(name, 1), types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}
