package source

import (
	"context"
	"testing"
	"testing/synctest"

	"github.com/async-helm/async-helm/pkg/chart/bounds"
)

func callerCtx(user string) context.Context {
	return WithCaller(context.Background(), Caller{User: user})
}

// A caller with four namespaces and slow servers does not hold every index fetch slot:
// one stays free for another caller, and once all are taken a freed slot goes to the
// waiting caller that holds the fewest, not to the first in the queue.
func TestFetchSlotsShareByCaller(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		f := NewFetchSlots(bounds.MaxIndexFetches)
		a := callerCtx("a")
		var releases []func()
		for _, ns := range []string{"a1", "a2", "a3"} {
			release, err := f.Acquire(a, TenantOf(a, ns))
			if err != nil {
				t.Fatalf("caller a, namespace %s: %v", ns, err)
			}
			releases = append(releases, release)
		}
		if _, ok := f.TryAcquire(TenantOf(a, "a4")); ok {
			t.Fatal("caller a took the last free slot through a fourth namespace")
		}
		b, ok := f.TryAcquire(TenantOf(callerCtx("b"), "b1"))
		if !ok {
			t.Fatal("caller b found no free slot")
		}
		got := make(chan string, 2)
		wait := func(ctx context.Context, who, ns string) {
			if release, err := f.Acquire(ctx, TenantOf(ctx, ns)); err == nil {
				got <- who
				release()
			}
		}
		go wait(a, "a", "a5")
		synctest.Wait()
		go wait(callerCtx("c"), "c", "c1")
		synctest.Wait()
		releases[0]()
		if first := <-got; first != "c" {
			t.Errorf("the freed slot went to caller %s, want c (a holds 2, c none)", first)
		}
		for _, release := range append(releases[1:], b) {
			release()
		}
		<-got
	})
}

// The refresh is a tenant like any other: all but one slot.
func TestFetchSlotsRefreshKeepsOne(t *testing.T) {
	f := NewFetchSlots(4)
	for range 3 {
		if _, ok := f.TryAcquire(RefreshTenant); !ok {
			t.Fatal("the refresh refused under three slots")
		}
	}
	if _, ok := f.TryAcquire(RefreshTenant); ok {
		t.Error("the refresh took the fourth slot")
	}
	if _, ok := f.TryAcquire(TenantOf(callerCtx("a"), "a")); !ok {
		t.Error("the slot kept free was refused to a tenant")
	}
}

// The ServiceAccounts of one namespace take one caller's share of the chart pools.
func TestTenantOfServiceAccountsIsTheirNamespace(t *testing.T) {
	for _, sa := range []string{"system:serviceaccount:team:sa1", "system:serviceaccount:team:sa2"} {
		ctx := WithCaller(context.Background(), Caller{User: sa})
		if got := TenantOf(ctx, "team").Caller; got != "system:serviceaccounts:team" {
			t.Errorf("TenantOf(%s) caller %q", sa, got)
		}
	}
}
