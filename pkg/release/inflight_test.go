package release

import (
	"runtime"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
)

// waiters is how many takes wait on b.
func waiters(b *byteBudget) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.waiting)
}

// waitFor yields until b has n waiters.
func waitFor(t *testing.T, b *byteBudget, n int) {
	t.Helper()
	for i := 0; waiters(b) != n; i++ {
		if i > 10_000_000 {
			t.Fatalf("%d waiters, want %d", waiters(b), n)
		}
		runtime.Gosched()
	}
}

// Full decodes (an upgrade's base record, the get route, Helm's reads) hold their
// decompressed bytes from the same process-wide budget as head decodes (J5: 32 concurrent
// reads of one 20 KiB Secret whose manifest is 15 MiB decoded at once, 902 MiB of heap).
func TestFullDecodesWaitForTheirShareOfTheBudget(t *testing.T) {
	payload, err := EncodeRelease(&helmrelease.Release{Name: "web", Namespace: "tenant", Version: 1, Manifest: strings.Repeat("m", 1<<20),
		Info: &helmrelease.Info{Status: helmrelease.StatusDeployed}, Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "0.1.0"}}})
	if err != nil {
		t.Fatal(err)
	}
	all := 4 * MaxRecordBytes
	inFlight.take("other", all)
	done := make(chan error, 1)
	go func() {
		_, _, _, err := decodeRecord(payload, recordBound, "tenant")
		done <- err
	}()
	waitFor(t, inFlight, 1)
	inFlight.give("other", all)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// The in-flight budget goes first to the tenant holding the least of it: a tenant's many
// waiting decodes do not hold another tenant's back.
func TestInFlightBytesAreHandedOutPerTenant(t *testing.T) {
	b := newByteBudget(10)
	b.take("a", 10)
	order := make(chan string, 3)
	for i, w := range []string{"a", "a", "b"} {
		go func() {
			b.take(w, 5)
			order <- w
		}()
		waitFor(t, b, i+1)
	}
	b.give("a", 10) // a's first and b's are served; a's second waits for a share
	got := []string{<-order, <-order}
	if !(got[0] == "a" && got[1] == "b" || got[0] == "b" && got[1] == "a") || waiters(b) != 1 {
		t.Fatalf("served %v with %d waiting, want a's first and b's, a's second waiting", got, waiters(b))
	}
	b.give("b", 5)
	if w := <-order; w != "a" {
		t.Fatalf("served %s, want a's second", w)
	}
}
