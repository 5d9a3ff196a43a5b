package actionlog

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/api"
)

// logServer answers the API calls of a Store over ten logs of one release, metadata only
// when asked for it as the API server does, and counts the bytes it sends.
type logServer struct {
	mu   sync.Mutex
	cms  []corev1.ConfigMap
	sent int
}

func (s *logServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var body any = metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess}
	switch {
	case r.Method != http.MethodGet:
	case r.URL.Path == "/api/v1/namespaces/team":
		body = corev1.Namespace{TypeMeta: metav1.TypeMeta{Kind: "Namespace", APIVersion: "v1"}, ObjectMeta: metav1.ObjectMeta{Name: "team", UID: "u"}}
	case strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadataList"):
		l := metav1.PartialObjectMetadataList{TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadataList", APIVersion: "meta.k8s.io/v1"}}
		for _, cm := range s.cms {
			l.Items = append(l.Items, metav1.PartialObjectMetadata{ObjectMeta: cm.ObjectMeta})
		}
		body = l
	case strings.HasSuffix(r.URL.Path, "/configmaps"):
		body = corev1.ConfigMapList{TypeMeta: metav1.TypeMeta{Kind: "ConfigMapList", APIVersion: "v1"}, Items: s.cms}
	default:
		for _, cm := range s.cms {
			if strings.HasSuffix(r.URL.Path, "/"+cm.Name) {
				body = cm
			}
		}
	}
	b, _ := json.Marshal(body)
	s.sent += len(b)
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// serve starts a logServer over ten logs of lineBytes each, and a Store on it.
func serve(t *testing.T, lineBytes int) (*Store, *logServer) {
	t.Helper()
	ls := &logServer{}
	uid := types.UID("u")
	for rev := 1; rev <= 10; rev++ {
		r := &Record{Namespace: "team", Name: "web", Revision: rev, RequestID: "r", Action: "upgrade", namespaceUID: &uid,
			Started: time.Date(2026, 12, 7, 2, rev, 0, 0, time.UTC), Lines: []api.LogLine{{Text: strings.Repeat("x", lineBytes)}}}
		cm, err := encode("async-helm", r)
		if err != nil {
			t.Fatal(err)
		}
		cm.UID, cm.TypeMeta = types.UID(fmt.Sprint("cm", rev)), metav1.TypeMeta{Kind: "ConfigMap", APIVersion: "v1"}
		ls.cms = append(ls.cms, *cm)
	}
	srv := httptest.NewServer(ls)
	t.Cleanup(srv.Close)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return &Store{Client: cs, Namespace: "async-helm"}, ls
}

// Pruning a release's logs reads their metadata: the same bytes whether each log holds
// 1 KiB or 512 KiB. Its latest log is the one log read whole.
func TestPruningReadsNoLogWhole(t *testing.T) {
	ctx := context.Background()
	read := map[int]int{}
	for _, size := range []int{1 << 10, 512 << 10} {
		store, ls := serve(t, size)
		if err := store.Prune(ctx, "team", "web", 5); err != nil {
			t.Fatal(err)
		}
		read[size] = ls.sent
		ls.sent = 0
		rec, err := store.Latest(ctx, "team", "web")
		if err != nil || rec.Revision != 10 {
			t.Fatalf("latest: %+v, %v", rec, err)
		}
		t.Logf("latest of ten logs of %d bytes read %d bytes", size, ls.sent)
		if ls.sent > size+16<<10 {
			t.Errorf("latest of ten logs of %d bytes read %d bytes, want one log's and their metadata", size, ls.sent)
		}
	}
	t.Logf("a prune read %d bytes of ten logs of 1 KiB, %d of ten of 512 KiB", read[1<<10], read[512<<10])
	if read[512<<10] != read[1<<10] {
		t.Errorf("a prune read %d bytes of ten logs of 1 KiB, %d of ten of 512 KiB: want the same", read[1<<10], read[512<<10])
	}
}
