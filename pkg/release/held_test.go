package release

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
