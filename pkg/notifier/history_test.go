package notifier

import (
	"strconv"
	"testing"
	"time"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/release"
)

func TestIsNews(t *testing.T) {
	since := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	dated := func(created time.Time, labels, annotations map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
			CreationTimestamp: metav1.NewTime(created), Labels: labels, Annotations: annotations}}
	}
	dayBefore := since.Add(-24 * time.Hour)
	for _, c := range []struct {
		name  string
		m     *metav1.PartialObjectMetadata
		since time.Time
		want  bool
	}{
		{"no Since: every record not marked is reported", dated(dayBefore, nil, nil), time.Time{}, true},
		{"a record that cannot be dated", dated(time.Time{}, nil, nil), since, true},
		{"written a day before the notifiers first ran", dated(dayBefore, nil, nil), since, false},
		{"written just past the margin before", dated(since.Add(-HistoryMargin-time.Second), nil, nil), since, false},
		{"written within the margin before", dated(since.Add(-HistoryMargin+time.Second), nil, nil), since, true},
		{"written after", dated(since.Add(time.Minute), nil, nil), since, true},
		{"an old Secret async-helm reserved or marked (request id)",
			dated(dayBefore, map[string]string{release.LabelRequestID: "req-1", release.LabelModifiedAt: "1"}, nil), since, true},
		{"an old Secret carrying an uninstall mark's labels",
			dated(dayBefore, map[string]string{release.LabelAction: "uninstall", release.LabelRevision: "1"}, nil), since, true},
		{"an old Secret carrying a seal only", dated(dayBefore, map[string]string{release.LabelSeal: "x"}, nil), since, true},
		{"an old Secret with an async-helm annotation", dated(dayBefore, nil, map[string]string{release.AnnotationFailure: "x"}), since, true},
		{"an old Secret with a label that only looks like ours", dated(dayBefore, map[string]string{"async-helm.io": "x"}, nil), since, false},
	} {
		if got := isNews(c.m, c.since); got != c.want {
			t.Errorf("%s: isNews = %v, want %v", c.name, got, c.want)
		}
	}
}

func TestLastChange(t *testing.T) {
	created := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	unix := func(t time.Time) string { return strconv.FormatInt(t.Unix(), 10) }
	meta := func(labels map[string]string) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created), Labels: labels}}
	}
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   time.Time
	}{
		{"creation only", nil, created},
		{"modified later", map[string]string{release.LabelModifiedAt: unix(created.Add(time.Hour))}, created.Add(time.Hour)},
		{"createdAt later than the Secret (a rewrite under the same name)", map[string]string{"createdAt": unix(created.Add(time.Minute))}, created.Add(time.Minute)},
		{"labels earlier than the Secret", map[string]string{release.LabelModifiedAt: unix(created.Add(-time.Hour))}, created},
		{"a label that is no time", map[string]string{release.LabelModifiedAt: "soon"}, created},
	} {
		if got := lastChange(meta(c.labels)); !got.Equal(c.want) {
			t.Errorf("%s: lastChange = %s, want %s", c.name, got, c.want)
		}
	}
}

// A record the notifiers never reported that last changed before they first ran is neither
// reported nor marked when first seen; its next change is reported. A record that changed
// after is reported as before.
func TestHistoryIsNeitherReportedNorMarked(t *testing.T) {
	e := newEnv(t)
	since := time.Now().Truncate(time.Second)
	e.svc.Since = since
	dated := func(name string, when time.Time) string {
		helmCLIRecord(e, name)
		at := strconv.FormatInt(when.Unix(), 10)
		e.Patch(name, 1, `{"metadata":{"labels":{"createdAt":"`+at+`","`+release.LabelModifiedAt+`":"`+at+`"}}}`)
		return "ns/" + release.SecretName(name, 1)
	}
	old := dated("old", since.Add(-24*time.Hour))
	recent := dated("recent", since.Add(time.Minute))
	if e.svc.observe(old, e.Meta("old", 1)) {
		t.Error("a record from before the notifiers first ran is queued")
	}
	if !e.svc.observe(recent, e.Meta("recent", 1)) {
		t.Error("a record changed since the notifiers first ran is not queued")
	}
	for _, key := range []string{old, recent} {
		if err := e.svc.sync(ctx(t), key); err != nil {
			t.Fatal(err)
		}
	}
	if e.svc.reportedAll(old, "deployed") {
		t.Error("a mark worker would record a status of the past as reported")
	}
	if got := e.sink.Statuses(t); len(got) != 1 || got[0] != "deployed" {
		t.Fatalf("sent %v, want the recent record's deployed only", got)
	}
	if got := e.Revision("old", 1).Notified; got != "" {
		t.Errorf("a record of the past was marked %q: the notifier rewrote a Secret it reported nothing of", got)
	}
	// Its next change is news like any other.
	e.Set("old", 1, helmrelease.StatusSuperseded, "")
	if !e.svc.observe(old, e.Meta("old", 1)) {
		t.Fatal("a change of a record of the past is not queued")
	}
	if err := e.svc.sync(ctx(t), old); err != nil {
		t.Fatal(err)
	}
	if got := e.sink.Statuses(t); len(got) != 2 || got[1] != "superseded" {
		t.Errorf("sent %v, want its superseded next", got)
	}
}

// helmCLIRecord is revision 1 of name, deployed, as the helm CLI writes it: no async-helm
// label or annotation.
func helmCLIRecord(e *env, name string) {
	e.t.Helper()
	e.Reserve(name, release.ActionInstall, 1)
	e.Set(name, 1, helmrelease.StatusDeployed, "")
	e.Patch(name, 1, `{"metadata":{"labels":{"`+release.LabelRequestID+`":null,"`+release.LabelRevision+`":null,"`+
		release.LabelChart+`":null,"`+release.LabelQueued+`":null}}}`)
	if m := e.Meta(name, 1); ours(m) {
		e.t.Fatalf("the helm CLI's record still carries async-helm's labels: %v", m.Labels)
	}
}

// An uninstall async-helm accepted on a record of the helm CLI's past is news to a notifier
// that starts later, even when the tenant has dated the Secret back to 1970 (Helm's
// createdAt and modifiedAt are labels it may rewrite).
func TestAnUninstallMarkIsNeverHistory(t *testing.T) {
	e := newEnv(t)
	helmCLIRecord(e, "web") // created at t0
	e.svc.Since = t0.Add(24 * time.Hour)
	e.clock.Step(25 * time.Hour)
	if _, err := e.store.MarkUninstalling(ctx(t), release.UninstallMark{Namespace: "ns", Name: "web", Revision: 1, RequestID: "req-un"}); err != nil {
		t.Fatal(err)
	}
	e.Patch("web", 1, `{"metadata":{"labels":{"createdAt":"1","`+release.LabelModifiedAt+`":"1"}}}`)
	key := "ns/" + release.SecretName("web", 1)
	if !e.svc.observe(key, e.Meta("web", 1)) {
		t.Fatal("a starting notifier takes an accepted uninstall for history: nothing queued")
	}
	if err := e.svc.sync(ctx(t), key); err != nil {
		t.Fatal(err)
	}
	if got := e.sink.Statuses(t); len(got) != 1 || got[0] != "uninstalling" {
		t.Errorf("sent %v, want uninstalling", got)
	}
}
