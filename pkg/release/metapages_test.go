package release

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// metaServer answers metadata lists of n release Secrets in pages, as the API server does;
// the Secrets in big carry 1 MiB of annotations each (a tenant's).
type metaServer struct {
	n   int
	big func(i int) bool
	// proto answers protobuf to a client that accepts it first, as the API server does.
	proto bool

	mu     sync.Mutex
	limits []int64
	sizes  []int // of each answer written
	protos int   // answers written as protobuf
}

func (m *metaServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, _ := strconv.ParseInt(q.Get("limit"), 10, 64)
	from, _ := strconv.Atoi(q.Get("continue"))
	l := metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadataList", APIVersion: "meta.k8s.io/v1"}}
	for i := from; i < m.n && int64(i-from) < limit; i++ {
		o := metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("r", i), Namespace: "ns",
			Labels: map[string]string{LabelOwner: OwnerHelm, LabelName: fmt.Sprint("r", i), LabelVersion: "1"}}}
		if m.big(i) {
			o.Annotations = map[string]string{"junk": strings.Repeat("j", 1<<20)}
		}
		l.Items = append(l.Items, o)
	}
	if next := from + len(l.Items); next < m.n {
		l.Continue = strconv.Itoa(next)
	}
	b, _ := json.Marshal(l)
	typ := "application/json"
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.proto && strings.HasPrefix(r.Header.Get("Accept"), "application/vnd.kubernetes.protobuf") {
		raw, _ := l.Marshal()
		u, _ := (&runtime.Unknown{Raw: raw, ContentType: "application/vnd.kubernetes.protobuf"}).Marshal()
		b, typ = append([]byte("k8s\x00"), u...), "application/vnd.kubernetes.protobuf"
		m.protos++
	}
	m.limits, m.sizes = append(m.limits, limit), append(m.sizes, len(b))
	w.Header().Set("Content-Type", typ)
	_, _ = w.Write(b)
}

// A metadata list reads pages of 500 Helm records (20 requests for 10,000, not 200), and an
// answer over 8 MiB (a tenant's Secrets with 1 MiB of metadata each) is asked again
// smaller: no page kept is over the cap, and every record is listed once.
func TestMetadataPagesAreLargeAndCappedInBytes(t *testing.T) {
	m := &metaServer{n: 1300, big: func(i int) bool { return i >= 1000 && i < 1030 }}
	srv := httptest.NewServer(m)
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	got, err := (&Store{Client: cs}).ReleaseMetas(context.Background(), "ns")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != m.n || got[0].Name != "r0" || got[m.n-1].Name != fmt.Sprint("r", m.n-1) {
		t.Fatalf("listed %d records, want %d in order", len(got), m.n)
	}
	if m.limits[0] != metaPage || m.limits[1] != metaPage {
		t.Errorf("the pages of small records asked for %v records, want %d", m.limits[:2], metaPage)
	}
	kept := 0
	for i, size := range m.sizes {
		if size <= metaPageBytes {
			kept++
		} else if m.limits[i] == 1 {
			t.Errorf("a page of one record was %d bytes", size)
		}
	}
	t.Logf("%d requests, limits %v", len(m.limits), m.limits)
	if len(m.limits) > 40 || kept == len(m.limits) {
		t.Errorf("%d requests (%d within the cap) for %d records, want a few over the cap asked again", len(m.limits), kept, m.n)
	}
}

// The pages are asked for as protobuf, which the API server encodes and submit decodes at a
// fraction of JSON's CPU (encoding/json was most of a 10,000-record list's), and the byte cap
// holds on a protobuf answer as on JSON.
func TestMetadataPagesAreReadAsProtobufWithinTheCap(t *testing.T) {
	m := &metaServer{n: 1300, big: func(i int) bool { return i >= 1000 && i < 1030 }, proto: true}
	srv := httptest.NewServer(m)
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	got, err := (&Store{Client: cs}).ReleaseMetas(context.Background(), "ns")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != m.n || got[0].Name != "r0" || got[m.n-1].Labels[LabelName] != fmt.Sprint("r", m.n-1) {
		t.Fatalf("listed %d records, want %d in order", len(got), m.n)
	}
	over := 0
	for _, size := range m.sizes {
		if size > metaPageBytes {
			over++
		}
	}
	if m.protos != len(m.sizes) || over == 0 || len(m.sizes) > 40 {
		t.Errorf("%d of %d answers protobuf, of %v bytes: want every page protobuf, some over the cap asked again", m.protos, len(m.sizes), m.sizes)
	}
}

// A value cut to maxIndexedValue is a copy: a window on the tenant's value would hold all of
// it (up to 256 KiB of annotations a Secret) for as long as the kept metadata lives.
func TestKeptMetadataHoldsNoneOfACutValue(t *testing.T) {
	long := strings.Repeat("f", 200<<10)
	m := keptMeta(metav1.ObjectMeta{Annotations: map[string]string{AnnotationFailure: long}})
	kept := m.Annotations[AnnotationFailure]
	start, end := uintptr(unsafe.Pointer(unsafe.StringData(long))), uintptr(unsafe.Pointer(unsafe.StringData(long)))+uintptr(len(long))
	if p := uintptr(unsafe.Pointer(unsafe.StringData(kept))); len(kept) != maxIndexedValue || (p >= start && p < end) {
		t.Errorf("kept %d bytes inside the tenant's %d-byte value", len(kept), len(long))
	}
}
