package actionlog

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/fakekube"
)

// Attack: a release keeps DefaultKeep logs, but each new release name adds its own: a
// namespace's logs in async-helm's namespace grew without bound. They are bounded per
// namespace, oldest out.
func TestANamespaceKeepsAtMostNamespaceKeepLogs(t *testing.T) {
	ctx := context.Background()
	clock := fakekube.NewClock(time.Date(2026, 12, 3, 23, 0, 0, 0, time.UTC))
	kc := fakekube.New(clock)
	store := &Store{Client: kc.Typed(), Namespace: "async-helm", NamespaceKeep: 3}
	for i := 1; i <= 6; i++ {
		clock.Add(time.Minute)
		name := fmt.Sprintf("web-%d", i)
		buf := NewBuffer(0, clock)
		buf.Append("installed")
		if err := NewWriter(store, buf, Record{Namespace: "team", Name: name, Revision: 1, Action: "install"}, clock).Flush(ctx, true); err != nil {
			t.Fatal(err)
		}
		if err := store.Prune(ctx, "team", name, 0); err != nil { // as the executor does after its first write
			t.Fatal(err)
		}
	}
	l, err := kc.Typed().CoreV1().ConfigMaps("async-helm").List(ctx, metav1.ListOptions{LabelSelector: LabelNamespace + "=team"})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Items) != 3 {
		t.Errorf("namespace team keeps %d logs, want 3", len(l.Items))
	}
	for _, name := range []string{"web-4", "web-5", "web-6"} {
		if _, err := store.Latest(ctx, "team", name); err != nil {
			t.Errorf("%s, among the newest, pruned: %v", name, err)
		}
	}
}
