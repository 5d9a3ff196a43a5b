package release

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
)

// tenantMetaServer answers metadata lists of n Secrets labelled as revisions of release
// web, each with what a tenant may write: 250 KiB of annotations and 3,000 labels of ~380
// bytes (about 1.4 MiB of metadata a Secret, under etcd's object bound). It pages as the
// API server does (limit, continue) and writes an answer item by item, so that only the
// reader's memory is measured.
type tenantMetaServer struct {
	n      int
	mu     sync.Mutex
	limits []int64
}

func (m *tenantMetaServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	limit, _ := strconv.Atoi(r.URL.Query().Get("limit"))
	from, _ := strconv.Atoi(r.URL.Query().Get("continue"))
	m.mu.Lock()
	m.limits = append(m.limits, int64(limit))
	m.mu.Unlock()
	to := m.n
	if limit > 0 {
		to = min(m.n, from+limit)
	}
	next := ""
	if to < m.n {
		next = strconv.Itoa(to)
	}
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"continue":%q},"items":[`, next)
	for i := from; i < to; i++ {
		labels := map[string]string{LabelOwner: OwnerHelm, LabelName: "web", LabelVersion: strconv.Itoa(i + 1), "status": "superseded"}
		for j := range 3000 {
			labels[fmt.Sprintf("%s.mallory.example/l%d", strings.TrimSuffix(strings.Repeat(strings.Repeat("p", 59)+".", 4), "."), j)] = strings.Repeat("v", 63)
		}
		item, _ := json.Marshal(metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			Name: SecretName("web", i+1), Namespace: "mallory", Labels: labels,
			Annotations: map[string]string{"mallory.example/pad": strings.Repeat("a", 250<<10)}}})
		if i > from {
			item = append([]byte{','}, item...)
		}
		if _, err := w.Write(item); err != nil {
			return // the reader stopped at its cap
		}
	}
	_, _ = w.Write([]byte("]}"))
}

// A release's live history (a cancel's, an uninstall's, every action's gather) reads its
// Secrets' metadata as every metadata list of tenant Secrets does: in pages, each answer
// read up to its byte cap, keeping of each what the index keeps. 100 Secrets of ~1.4 MiB
// of metadata labelled as revisions of one release were one answer of 118 MiB (+629 MiB).
func TestLiveHistoryReadsCappedPages(t *testing.T) {
	m := &tenantMetaServer{n: 100}
	srv := httptest.NewServer(m)
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	md, err := metadata.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := &Store{Client: cs, Metadata: md}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	done, sampled := make(chan struct{}), make(chan struct{})
	go func() { // samples the heap while the read runs
		defer close(sampled)
		for {
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			peak.Store(max(peak.Load(), ms.HeapAlloc))
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	revs, err := s.LiveHistory(context.Background(), "mallory", "web")
	close(done)
	<-sampled
	grew := int64(peak.Load()) - int64(base)
	m.mu.Lock()
	defer m.mu.Unlock()
	t.Logf("LiveHistory of 100 Secrets of ~1.4 MiB metadata: %d revisions, %v; %d answers asked with limits %v; heap peak +%d MiB",
		len(revs), err, len(m.limits), m.limits, grew>>20)
	if err != nil || len(revs) != m.n || revs[0].Version != m.n {
		t.Errorf("LiveHistory: %d revisions, %v; want all %d, newest first", len(revs), err, m.n)
	}
	for _, l := range m.limits {
		if l == 0 {
			t.Errorf("LiveHistory asked for an answer without a page limit")
		}
	}
	if grew > 64<<20 {
		t.Errorf("LiveHistory held %d MiB at once, want at most 64 MiB (an answer is read up to %d MiB)", grew>>20, metaPageBytes>>20)
	}
}
