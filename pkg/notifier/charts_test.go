package notifier

import (
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// A record the helm CLI wrote (no chart label) is read for its chart once, not once per
// status reported; a failure is still read for its reason.
func TestAHelmRecordIsReadForItsChartOnce(t *testing.T) {
	e := newEnv(t)
	now := helmtime.Time{Time: t0}
	rel := &helmrelease.Release{Name: "cli", Namespace: "ns", Version: 1,
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "nginx", Version: "15.0.0", AppVersion: "1.25"}},
		Info:  &helmrelease.Info{Status: helmrelease.StatusPendingInstall, FirstDeployed: now, LastDeployed: now, Description: "boom"}}
	if err := storage.NewSecrets(e.c.CoreV1().Secrets("ns")).Create(release.SecretName("cli", 1), rel); err != nil {
		t.Fatal(err)
	}
	rev := e.Revision("cli", 1)
	want := events.StatusChange{Chart: "nginx", ChartVersion: "15.0.0", AppVersion: "1.25"}
	e.c.ClearActions()
	for i, status := range []string{"pending-install", "deployed", "superseded", "failed"} {
		var c events.StatusChange
		if err := e.svc.describe(ctx(t), rev, status, &c); err != nil {
			t.Fatal(err)
		}
		if c.Chart != want.Chart || c.ChartVersion != want.ChartVersion || c.AppVersion != want.AppVersion {
			t.Errorf("%s: %+v", status, c)
		}
		wantReads := 1
		if status == "failed" {
			wantReads = 2
			if c.Reason != "boom" {
				t.Errorf("failed without its reason: %+v", c)
			}
		}
		if gets := e.SecretGets(); len(gets) != wantReads {
			t.Errorf("after %d statuses: %d reads of the record, want %d", i+1, len(gets), wantReads)
		}
	}
}

// A record's text reaches its status event within the event's bounds: a tenant's failed
// record with a description of many MiB (a few KiB of Secret) gives an event of a few KiB
// that still reads the reason's start and end, and the chart kept for the record is cut too.
func TestAFailedRecordsStatusEventCarriesItsTextBounded(t *testing.T) {
	e := newEnv(t)
	now := helmtime.Time{Time: t0}
	desc := "UPGRADE FAILED: " + strings.Repeat("x", 8<<20) + ": the cause"
	long := strings.Repeat("c", 1<<20)
	rel := &helmrelease.Release{Name: "cli", Namespace: "ns", Version: 1,
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "n" + long, Version: "1.0.0" + long, AppVersion: long}},
		Info:  &helmrelease.Info{Status: helmrelease.StatusFailed, FirstDeployed: now, LastDeployed: now, Description: desc}}
	if err := storage.NewSecrets(e.c.CoreV1().Secrets("ns")).Create(release.SecretName("cli", 1), rel); err != nil {
		t.Fatal(err)
	}
	rev := e.Revision("cli", 1)
	if err := e.svc.report(ctx(t), "ns/"+rev.SecretName, rev, "failed"); err != nil {
		t.Fatal(err)
	}
	got := e.sink.Events()
	if len(got) != 1 {
		t.Fatalf("%d events, want 1", len(got))
	}
	n := len(got[0].Data())
	sec, err := e.c.CoreV1().Secrets("ns").Get(ctx(t), rev.SecretName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("record payload %d KiB, description %d KiB: status event data %d bytes", len(sec.Data["release"])>>10, len(desc)>>10, n)
	if n > 16<<10 {
		t.Fatalf("the status event carries %d KiB of the record's text (description %d KiB)", n>>10, len(desc)>>10)
	}
	c, err := events.ParseStatus(got[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.Reason, "UPGRADE FAILED: xxx") || !strings.HasSuffix(c.Reason, "xx: the cause") ||
		!strings.Contains(c.Reason, " bytes cut]… ") || len(c.Reason) > events.MaxReasonBytes {
		t.Errorf("reason of %d bytes: %.80q…", len(c.Reason), c.Reason)
	}
	kept, _ := e.svc.cachedChart(rev.UID)
	for _, f := range []string{c.Chart, c.ChartVersion, c.AppVersion, kept.name, kept.version, kept.appVersion} {
		if len(f) > events.MaxChartFieldBytes {
			t.Errorf("a chart field of %d bytes sent or kept for the record (at most %d)", len(f), events.MaxChartFieldBytes)
		}
	}
	if !strings.HasPrefix(c.Chart, "nccc") || !strings.HasPrefix(c.ChartVersion, "1.0.0ccc") {
		t.Errorf("chart %.20q version %.20q", c.Chart, c.ChartVersion)
	}
}
