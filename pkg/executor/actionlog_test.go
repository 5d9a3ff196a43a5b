package executor

import (
	"context"
	"errors"
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"

	"github.com/async-helm/async-helm/pkg/actionlog"
	"github.com/async-helm/async-helm/pkg/helmexec"
)

// loggingHelm logs as Helm does, then fails as a wait that timed out.
type loggingHelm struct{ *fakeHelm }

func (h loggingHelm) Install(ctx context.Context, req helmexec.Request, opts ...helmexec.Option) (*helmrelease.Release, error) {
	logf := helmexec.LogOf(opts...)
	logf("creating %d resource(s)", 1)
	logf("beginning wait for %d resources with timeout of %v", 1, req.Timeout)
	for i := 0; i < 5; i++ {
		logf("Deployment is not ready: %s/%s. %d out of %d expected pods are ready", req.Namespace, "web", 0, 1)
	}
	// Helm's Secrets driver prints a record it cannot decode whole.
	logf("list: failed to decode release: %v: %s", &corev1.Secret{Data: map[string][]byte{"values": []byte("password=hunter2")}}, "bad")
	return nil, errors.New("context deadline exceeded")
}

func TestActionLogIsWrittenWholeBeforeTheFailureIsRecorded(t *testing.T) {
	e := newEnv(t, 1)
	store := &actionlog.Store{Client: e.c, Namespace: "async-helm"}
	e.svc.ActionLogs = &ActionLogs{Store: store}
	e.svc.Helm = loggingHelm{e.helm}
	a := e.reserve("web", "req-1")
	got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
	if err != nil || got != OutcomeFailed {
		t.Fatalf("Handle = %s, %v", got, err)
	}
	rec, err := store.Get(ctx(t), "ns", "web", 1)
	if err != nil {
		t.Fatal(err)
	}
	var texts []string
	for _, l := range rec.Lines {
		texts = append(texts, l.Text)
	}
	want := []string{"creating 1 resource(s)", "beginning wait for 1 resources with timeout of 1m0s",
		"Deployment is not ready: ns/web. 0 out of 1 expected pods are ready",
		"list: failed to decode release: [redacted]: bad", "Error: context deadline exceeded"}
	if strings.Join(texts, "\n") != strings.Join(want, "\n") {
		t.Errorf("log:\n%s\nwant:\n%s", strings.Join(texts, "\n"), strings.Join(want, "\n"))
	}
	if rec.Running || rec.RequestID != "req-1" || rec.Action != "install" || rec.Lines[2].Repeated != 4 {
		t.Errorf("record %+v (line 3 repeated %d)", rec, rec.Lines[2].Repeated)
	}
	// The final write came before the record was marked failed (the notifier attaches the
	// tail when it sees "failed"): the ConfigMap's last write precedes the Secret's.
	var cmWrite, secretWrite int
	for i, act := range e.c.Actions() {
		switch {
		case act.GetResource().Resource == "configmaps" && (act.GetVerb() == "update" || act.GetVerb() == "create"):
			cmWrite = i
		case act.GetResource().Resource == "secrets" && act.GetVerb() == "update":
			secretWrite = i
		}
	}
	if cmWrite == 0 || cmWrite > secretWrite {
		t.Errorf("last log write at call %d, failure recorded at call %d", cmWrite, secretWrite)
	}
}
