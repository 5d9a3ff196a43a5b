package notifier

import (
	"strconv"
	"testing"
	"time"

	"go.uber.org/zap"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release"
)

// The mark of a reported status sits on the tenant's Secret. A tenant who writes it (set
// to the current status, or copied from another record) silences nothing for a notifier
// that starts later, and makes nothing history; the notifier's own mark still keeps a
// restart from reporting the same status again.
func TestATenantsNotifiedMarkSilencesNothing(t *testing.T) {
	e := newEnv(t)
	e.svc.SigningKey = signingKey
	fresh := func() *Service { // a notifier process that starts now
		s := &Service{Client: e.c, Metadata: e.c.Metadata(), Store: e.store, Sender: e.sink,
			Log: zap.NewNop().Sugar(), Clock: e.clock, SigningKey: signingKey, Since: e.svc.Since}
		s.Init()
		return s
	}
	deployed := func(name string) string {
		e.Reserve(name, release.ActionInstall, 1)
		e.Set(name, 1, helmrelease.StatusDeployed, "")
		return "ns/" + release.SecretName(name, 1)
	}
	reported, forged, copied := deployed("reported"), deployed("forged"), deployed("copied")
	// The notifier reports and marks "reported" as it runs.
	e.svc.observe(reported, e.Meta("reported", 1))
	if err := e.svc.sync(ctx(t), reported); err != nil {
		t.Fatal(err)
	}
	if err := e.svc.markNotified(ctx(t), e.Revision("reported", 1)); err != nil {
		t.Fatal(err)
	}
	mark := e.Meta("reported", 1).Annotations
	// The tenant writes the mark on its other records.
	e.Patch("forged", 1, `{"metadata":{"annotations":{"`+release.AnnotationNotified+`":"deployed"}}}`)
	e.Patch("copied", 1, `{"metadata":{"annotations":{"`+release.AnnotationNotified+`":"deployed","`+
		release.AnnotationNotifiedSig+`":"`+mark[release.AnnotationNotifiedSig]+`"}}}`)
	s := fresh()
	if s.observe(reported, e.Meta("reported", 1)) {
		t.Error("a status the notifier reported and marked is reported again by the next one")
	}
	if !s.observe(forged, e.Meta("forged", 1)) {
		t.Error("a mark the tenant wrote silences a starting notifier")
	}
	if !s.observe(copied, e.Meta("copied", 1)) {
		t.Error("a mark copied from another record silences a starting notifier")
	}
	// Nor does the mark make a record of the helm CLI's past news.
	s.Since = t0.Add(24 * time.Hour)
	helmCLIRecord(e, "old")
	at := strconv.FormatInt(t0.Unix(), 10)
	e.Patch("old", 1, `{"metadata":{"labels":{"createdAt":"`+at+`","`+release.LabelModifiedAt+`":"`+at+`"},`+
		`"annotations":{"`+release.AnnotationNotified+`":"failed"}}}`)
	if s.observe("ns/"+release.SecretName("old", 1), e.Meta("old", 1)) {
		t.Error("a tenant's mark on a record of the past makes it news")
	}
}
