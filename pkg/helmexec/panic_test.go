package helmexec

import (
	"errors"
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release"
)

// A tenant's record with "hooks":[null] made Helm's rollback dereference nil in its hook
// code, on runBounded's goroutine: the whole executor died.
// The panic is now this action's failure, and the process goes on.
func TestRollbackOntoARecordWithANullHookFailsTheActionNotTheProcess(t *testing.T) {
	f, mem, opts := offline(t)
	installTwice(t, f, mem, opts)
	v1 := get(t, mem, "web", 1)
	v1.Hooks = []*helmrelease.Hook{nil}
	if err := mem.Update(release.SecretName("web", 1), v1); err != nil {
		t.Fatal(err)
	}
	reserve(t, mem, "web", 3, helmrelease.StatusPendingRollback)
	_, err := f.Rollback(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 3, RollbackTo: 1,
		RollbackPin: pinOf(t, mem, 1), Labels: release.Labels("r3", 3, "tiny", "1.0.0")}, opts...)
	if !errors.Is(err, ErrHelmPanicked) || !strings.Contains(err.Error(), "nil pointer") {
		t.Fatalf("rollback onto a null hook answered %v, want ErrHelmPanicked with the panic's reason", err)
	}
}

// Helm's uninstall runs on the caller's goroutine (the executor's request handler): a
// panic in its hook code on the tenant's latest record fails the uninstall the same way.
func TestUninstallOfARecordWithANullHookFailsTheActionNotTheProcess(t *testing.T) {
	f, mem, opts := offline(t)
	installTwice(t, f, mem, opts)
	v2 := get(t, mem, "web", 2)
	v2.Info.Status = helmrelease.StatusUninstalling
	v2.Hooks = []*helmrelease.Hook{nil}
	if err := mem.Update(release.SecretName("web", 2), v2); err != nil {
		t.Fatal(err)
	}
	_, err := f.Uninstall(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 2}, opts...)
	if !errors.Is(err, ErrHelmPanicked) || !strings.Contains(err.Error(), "uninstall ns/web") {
		t.Fatalf("uninstall of a null hook answered %v, want ErrHelmPanicked, wrapped with the release", err)
	}
}

// Whatever panics in an action, runBounded answers it as an error and the fence sees the
// action's goroutine return (no orphan counted forever).
func TestRunBoundedTurnsAPanicIntoAnError(t *testing.T) {
	orphans := &Orphans{}
	fence := &Fence{Orphans: orphans}
	rel, err := runBounded(ctx(t), fence, func() (*helmrelease.Release, error) {
		panic("boom")
	})
	if rel != nil || !errors.Is(err, ErrHelmPanicked) || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("runBounded answered %v, %v; want ErrHelmPanicked: boom", rel, err)
	}
	fence.End()
	waitOrphansGone(t, orphans)
}
