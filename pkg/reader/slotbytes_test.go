package reader

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// manifestRecords writes n records into ns whose manifests are 15 MiB of one letter
// (about 20 KiB each in the Secret).
func manifestRecords(t *testing.T, cs *fake.Clientset, ns string, n int) {
	t.Helper()
	manifest := strings.Repeat("m", 15<<20)
	for i := range n {
		now := helmtime.Now()
		r := &helmrelease.Release{Name: fmt.Sprintf("big-%d", i), Namespace: ns, Version: 1, Manifest: manifest,
			Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "0.1.0", APIVersion: "v2"}},
			Info:  &helmrelease.Info{FirstDeployed: now, LastDeployed: now, Status: helmrelease.StatusDeployed}}
		if err := storage.NewSecrets(cs.CoreV1().Secrets(ns)).Create(release.SecretName(r.Name, 1), r); err != nil {
			t.Fatal(err)
		}
	}
}

// heapPeak samples the heap until the returned stop is called, which answers its peak
// above the heap at the start.
func heapPeak() (stop func() int64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	base := m.HeapAlloc
	var peak atomic.Uint64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			peak.Store(max(peak.Load(), m.HeapAlloc))
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	return func() int64 {
		close(done)
		<-sampled
		return int64(peak.Load()) - int64(base)
	}
}

// The read slots hand out submit's memory for whole records, not only turns: each read
// keeps at most its slot's share of one read's budget, and a list whose records pass it
// is refused whole (ErrTooLarge), never answered in part. 4 lists without limitInfo at
// once, of namespaces holding 4 records whose manifests are 15 MiB (20 KiB Secrets), stay
// within submit's GOMEMLIMIT (320 MiB) with their answers encoded; they held 420-585 MiB.
func TestReadsHoldAtMostTheirSlotsRecords(t *testing.T) {
	cs := fake.NewClientset()
	manifestRecords(t, cs, "team-a", 4)
	manifestRecords(t, cs, "team-b", 4)
	manifestRecords(t, cs, "team-c", 1)
	f, err := helmexec.NewFactory(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	a := &authz{may: map[string]map[string]bool{"alice": {"team-a": true}, "bob": {"team-b": true, "team-c": true}}}
	s := &Service{Helm: secretsHelm{f: f, cs: cs}, Authorizer: a}
	stop := heapPeak()
	var wg sync.WaitGroup
	for i, who := range []string{"alice", "alice", "alice", "bob"} {
		ns := map[string]string{"alice": "team-a", "bob": "team-b"}[who]
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			out, err := s.List(ctx, &auth.User{Name: who}, ns, false)
			if err != nil {
				if !errors.Is(err, ErrTooLarge) {
					t.Errorf("list %d of %s: %v", i, ns, err)
				}
				return
			}
			if n := len(out.([]api.Release)); n != 4 {
				t.Errorf("list %d of %s answered %d of its 4 releases", i, ns, n)
			}
			_ = json.NewEncoder(io.Discard).Encode(out) // the answer
		}()
	}
	wg.Wait()
	grew := stop()
	t.Logf("4 lists without limitInfo at once, of 4 records of 15 MiB manifests each: heap peaked at %d MiB", grew>>20)
	if grew > 320<<20 {
		t.Errorf("4 lists held %d MiB at once, over submit's GOMEMLIMIT (320 MiB)", grew>>20)
	}
	out, err := s.List(ctx(t), &auth.User{Name: "bob"}, "team-c", false)
	if rows, _ := out.([]api.Release); err != nil || len(rows) != 1 {
		t.Errorf("a list within its slot's share: %d releases, %v", len(rows), err)
	}
}
