package notifier

import (
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/actionlog"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// A failed status event carries the end of its action's log; other statuses, and a log
// of an earlier request of the same revision, do not.
func TestFailedEventCarriesTheLogTail(t *testing.T) {
	for _, tc := range []struct {
		name, requestID string
		want            bool
	}{{"its request's log", "req-web", true}, {"an earlier request's log", "req-old", false}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			store := &actionlog.Store{Client: e.c, Namespace: "async-helm"}
			e.svc.ActionLogs = store
			buf := actionlog.NewBuffer(0, e.clock)
			w := actionlog.NewWriter(store, buf, actionlog.Record{Namespace: "ns", Name: "web", Revision: 1, RequestID: tc.requestID}, e.clock)
			for i := 0; i < 30; i++ {
				buf.Append("line " + strings.Repeat("x", i))
			}
			buf.Append("Deployment is not ready: ns/web. 0 out of 1 expected pods are ready")
			buf.Append("Deployment is not ready: ns/web. 0 out of 1 expected pods are ready")
			buf.Append("Error: context deadline exceeded")
			if err := w.Flush(ctx(t), true); err != nil {
				t.Fatal(err)
			}
			key := "ns/" + release.SecretName("web", 1)
			e.Reserve("web", release.ActionInstall, 1)
			e.svc.observe(key, e.Meta("web", 1))
			e.Set("web", 1, helmrelease.StatusFailed, "context deadline exceeded")
			e.svc.observe(key, e.Meta("web", 1))
			if err := e.svc.sync(ctx(t), key); err != nil {
				t.Fatal(err)
			}
			evs := e.sink.Events()
			pending, _ := events.ParseStatus(evs[0])
			failed, _ := events.ParseStatus(evs[len(evs)-1])
			if pending.LogTail != "" || failed.Status != "failed" {
				t.Fatalf("events %+v %+v", pending, failed)
			}
			if !tc.want {
				if failed.LogTail != "" {
					t.Errorf("tail of another request's log: %q", failed.LogTail)
				}
				return
			}
			lines := strings.Split(failed.LogTail, "\n")
			if len(lines) != actionlog.TailLines || lines[len(lines)-1] != "Error: context deadline exceeded" ||
				lines[len(lines)-2] != "Deployment is not ready: ns/web. 0 out of 1 expected pods are ready (2 times)" {
				t.Errorf("tail (%d lines):\n%s", len(lines), failed.LogTail)
			}
		})
	}
}
