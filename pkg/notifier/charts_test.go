package notifier

import (
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	helmtime "helm.sh/helm/v3/pkg/time"

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
