package actionlog

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/pkg/release"
)

// Attack: a log was answered when it started after its namespace's creation, the start on
// the executor's clock and the creation on the API server's. An executor whose clock ran
// ahead served the previous owner's log to the next owner of a re-made namespace name, and
// one whose clock ran behind hid a namespace's own logs from it. A log is its namespace's
// by UID, whatever the clocks say.
func TestALogIsItsNamespacesByUID(t *testing.T) {
	ctx := context.Background()
	server := fakekube.NewClock(time.Date(2026, 12, 3, 23, 0, 0, 0, time.UTC))
	kc := fakekube.New(server)
	store := &Store{Client: kc.Typed(), Namespace: "async-helm"}
	nss := kc.Typed().CoreV1().Namespaces()
	remake := func() {
		_ = nss.Delete(ctx, "team", metav1.DeleteOptions{})
		if _, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	write := func(name string, skew time.Duration) {
		executor := fakekube.NewClock(server.Now().Add(skew))
		buf := NewBuffer(0, executor)
		buf.Append("Error: password=hunter2 is not valid")
		w := NewWriter(store, buf, Record{Namespace: "team", Name: name, Revision: 1, RequestID: "r", Action: "install"}, executor)
		if err := w.Flush(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	remake()
	write("web", 2*time.Hour) // the previous owner's, on a clock 2 h ahead
	server.Add(time.Hour)
	remake()
	if rec, err := store.Latest(ctx, "team", "web"); !errors.Is(err, release.ErrNotFound) {
		t.Errorf("the previous owner's latest log, in the re-made namespace: %+v, %v, want ErrNotFound", rec, err)
	}
	if rec, err := store.Get(ctx, "team", "web", 1); !errors.Is(err, release.ErrNotFound) {
		t.Errorf("the previous owner's revision 1, in the re-made namespace: %+v, %v, want ErrNotFound", rec, err)
	}
	write("api", -2*time.Hour) // the new owner's, on a clock 2 h behind
	if _, err := store.Latest(ctx, "team", "api"); err != nil {
		t.Errorf("the namespace's own latest log: %v", err)
	}
	if tail, err := store.Tail(ctx, "team", "api", 1, "r"); err != nil || tail == "" {
		t.Errorf("the namespace's own tail: %q, %v", tail, err)
	}
}
