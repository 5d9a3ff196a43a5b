package knative

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/actionlog"
)

// The action's log: the executor writes and prunes it, submit reads it, the notifier reads
// a tail and prunes by age; neither submit nor the notifier writes one, and no function
// writes ConfigMaps in a tenant's namespace.
func TestActionLogRBAC(t *testing.T) {
	applyRBAC(t)
	ns := cluster.Namespace(t)
	ctx := context.Background()
	own := "async-helm"
	release := "rbac-" + ns
	exec := &actionlog.Store{Client: as(t, "executor").Typed, Namespace: own}
	buf := actionlog.NewBuffer(0, nil)
	buf.Append("creating 1 resource(s)")
	w := actionlog.NewWriter(exec, buf, actionlog.Record{Namespace: ns, Name: release, Revision: 1, RequestID: "r1"}, nil)
	must(t, "executor writes a log", w.Flush(ctx, false))
	buf.Append("Error: boom")
	must(t, "executor updates a log", w.Flush(ctx, true))
	must(t, "executor prunes a release's logs", exec.Prune(ctx, ns, release, 5))

	submit := &actionlog.Store{Client: as(t, "submit").Typed, Namespace: own}
	_, err := submit.Get(ctx, ns, release, 1)
	must(t, "submit reads a log", err)
	_, err = submit.Latest(ctx, ns, release)
	must(t, "submit lists a release's logs", err)
	notifier := &actionlog.Store{Client: as(t, "notifier").Typed, Namespace: own}
	tail, err := notifier.Tail(ctx, ns, release, 1, "r1")
	if err != nil || tail != "creating 1 resource(s)\nError: boom" {
		t.Errorf("notifier reads a tail: %q %v", tail, err)
	}
	for _, fn := range []string{"submit", "notifier"} {
		w := actionlog.NewWriter(&actionlog.Store{Client: as(t, fn).Typed, Namespace: own}, actionlog.NewBuffer(0, nil),
			actionlog.Record{Namespace: ns, Name: release, Revision: 2}, nil)
		forbidden(t, fn+" writes a log", w.Flush(ctx, false))
	}
	for _, fn := range []string{"submit", "notifier", "executor"} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}
		_, err := as(t, fn).Typed.CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{})
		forbidden(t, fn+" creates a ConfigMap in a tenant namespace", err)
	}
	// The notifier's age prune lists the logs and deletes those past the age (not all of
	// them here: other tests' logs live in the same namespace).
	if _, err := notifier.PruneOlder(ctx, time.Now().Add(-time.Hour)); err != nil {
		t.Errorf("notifier prunes by age: %v", err)
	}
	err = as(t, "notifier").Typed.CoreV1().ConfigMaps(own).Delete(ctx, actionlog.ObjectName(ns, release, 1), metav1.DeleteOptions{})
	must(t, "notifier deletes a log", err)
}
