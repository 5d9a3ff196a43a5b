package lease

import (
	"errors"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// A tombstone goes through its life: dug with its labels, listed and read back as written,
// finished, and buried only as it was read.
func TestTombstoneLifecycle(t *testing.T) {
	c := fakekube.New(fakekube.NewClock(t0))
	dug, err := DigTombstone(ctx(t), c, Tombstone{Namespace: "ns", Name: "web", Revision: 2, RequestID: "req/u", Chart: "tiny-1.0.0", SecretUID: "uid-1"})
	if err != nil {
		t.Fatal(err)
	}
	if dug.Lease() != TombstoneName("web", 2, "req/u") || dug.SecretName() != storage.Key("web", 2) {
		t.Fatalf("dug %q for %q", dug.Lease(), dug.SecretName())
	}
	// A redriven uninstall digs again: its own tombstone stays.
	if _, err := DigTombstone(ctx(t), c, dug); err != nil {
		t.Fatalf("second dig: %v", err)
	}
	all, _, err := TombstonePage(ctx(t), c, "", "")
	if err != nil || len(all) != 1 {
		t.Fatalf("Tombstones = %+v, %v", all, err)
	}
	got := all[0]
	if got.Name != "web" || got.Revision != 2 || got.RequestID != "req/u" || got.Chart != "tiny-1.0.0" ||
		got.SecretUID != "uid-1" || got.Done || !got.WellNamed() || got.LeaseUID() == "" {
		t.Fatalf("read back %+v", got)
	}
	if err := FinishTombstone(ctx(t), c, got); err != nil {
		t.Fatal(err)
	}
	done, err := ReadTombstone(ctx(t), c, "ns", got.Lease())
	if err != nil || done == nil || !done.Done {
		t.Fatalf("after finish: %+v, %v", done, err)
	}
	// got was read before the finish: burying it would delete a Lease it has not seen.
	if err := BuryTombstone(ctx(t), c, got); !errors.Is(err, storage.ErrConflict) {
		t.Fatalf("bury of a stale read: %v, want ErrConflict", err)
	}
	if err := BuryTombstone(ctx(t), c, *done); err != nil {
		t.Fatal(err)
	}
	if gone, err := ReadTombstone(ctx(t), c, "ns", got.Lease()); gone != nil || err != nil {
		t.Fatalf("after bury: %+v, %v", gone, err)
	}
	if err := BuryTombstone(ctx(t), c, *done); err != nil {
		t.Errorf("bury of a gone tombstone: %v", err)
	}
}

// Only Leases with the tombstone's labels are tombstones, and one under another name than
// its labels give is not well named (a tenant's forgery).
func TestTombstoneFrom(t *testing.T) {
	labels := func() map[string]string {
		return map[string]string{LabelManagedBy: ManagedByUs, LabelAction: ActionUninstall, LabelRelease: "web",
			LabelRevision: "3", LabelRequestID: "r"}
	}
	lease := func(name string, l map[string]string) *coordinationv1.Lease {
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", Labels: l}}
	}
	if tb, ok := TombstoneFrom(lease(TombstoneName("web", 3, "r"), labels())); !ok || !tb.WellNamed() || tb.Revision != 3 {
		t.Errorf("a tombstone: %+v %v", tb, ok)
	}
	if tb, ok := TombstoneFrom(lease("other", labels())); !ok || tb.WellNamed() {
		t.Errorf("a forged name reads as well named: %+v %v", tb, ok)
	}
	for _, drop := range []string{LabelManagedBy, LabelAction, LabelRelease, LabelRevision} {
		l := labels()
		delete(l, drop)
		if _, ok := TombstoneFrom(lease(TombstoneName("web", 3, "r"), l)); ok {
			t.Errorf("without %s: read as a tombstone", drop)
		}
	}
	if a, b := TombstoneName("web", 3, "r"), TombstoneName("web", 3, "s"); a == b {
		t.Errorf("two requests share tombstone %s", a)
	}
}

// Attack: a namespace editor labels Leases as tombstones with a secret-uid annotation of
// 200 KiB; the sweep lists a namespace's tombstones and held each value. A secret-uid longer
// than a UID is no tombstone's.
func TestATombstoneWithALongSecretUIDIsNone(t *testing.T) {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: TombstoneName("web", 3, "r"), Namespace: "ns",
		Labels: map[string]string{LabelManagedBy: ManagedByUs, LabelAction: ActionUninstall, LabelRelease: "web",
			LabelRevision: "3", LabelRequestID: "r"},
		Annotations: map[string]string{AnnotationSecretUID: strings.Repeat("x", 200<<10)}}}
	if tb, ok := TombstoneFrom(l); ok {
		t.Errorf("read as a tombstone, holding a secret-uid of %d bytes", len(tb.SecretUID))
	}
}
