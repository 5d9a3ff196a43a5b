package sweeper

import (
	"fmt"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

// A decoy Secret labelled as our pending revision 2 of another release (Flux's, with no
// labels of ours) does not get the sweeper to fail that release's own revision.
func TestDecoyDoesNotTargetAnotherRecord(t *testing.T) {
	e := newEnv(t)
	d := storage.NewSecrets(e.c.CoreV1().Secrets("ns"))
	rel := &helmrelease.Release{Name: "flux-app", Namespace: "ns", Version: 2,
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "1.0.0"}},
		Info:  &helmrelease.Info{Status: helmrelease.StatusPendingUpgrade}}
	if err := d.Create(release.SecretName("flux-app", 2), rel); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CoreV1().Secrets("ns").Create(ctx(t), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "decoy", Namespace: "ns",
		Labels: map[string]string{"owner": "helm", "name": "flux-app", "version": "2", release.LabelRevision: "2", "status": "pending-upgrade"}},
		Type: release.SecretType}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.clock.Add(2 * time.Hour)
	res, err := e.sw.SweepOnce(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if st, desc := e.Status("flux-app", 2); st != helmrelease.StatusPendingUpgrade || res.Failed != 0 {
		t.Errorf("swept %+v: Flux's pending revision became %s %q through a decoy", res, st, desc)
	}
}

// A record in the tenant's namespace whose payload names another namespace ("victim"):
// failing the never-adopted upgrade once read victim's deployed revision with the
// notifier's access and copied its values and manifest into the tenant's record. The
// payload is bound to the Secret it is in; this one is failed in its labels only.
func TestForeignPayloadDoesNotReadAnotherNamespace(t *testing.T) {
	e := newEnv(t)
	const secret = "password: hunter2-victim"
	victim := storage.NewSecrets(e.c.CoreV1().Secrets("victim"))
	if err := victim.Create(release.SecretName("db", 1), &helmrelease.Release{Name: "db", Namespace: "victim", Version: 1,
		Chart:  &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "1.0.0"}},
		Config: map[string]any{"password": "hunter2-victim"}, Manifest: secret,
		Info: &helmrelease.Info{Status: helmrelease.StatusDeployed}}); err != nil {
		t.Fatal(err)
	}
	forged := storage.NewSecrets(e.c.CoreV1().Secrets("ns"))
	if err := forged.Create(release.SecretName("db", 2), &helmrelease.Release{Name: "db", Namespace: "victim", Version: 2,
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "1.0.0"}},
		Info:  &helmrelease.Info{Status: helmrelease.StatusPendingUpgrade}}); err != nil {
		t.Fatal(err)
	}
	e.Patch("db", 2, fmt.Sprintf(`{"metadata":{"labels":{%q:"2",%q:"x"}}}`, release.LabelRevision, release.LabelRequestID))
	e.clock.Add(2 * time.Hour)
	if _, err := e.sw.SweepOnce(ctx(t)); err != nil {
		t.Fatal(err)
	}
	sec, err := e.c.CoreV1().Secrets("ns").Get(ctx(t), release.SecretName("db", 2), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rel, err := release.DecodeRelease(sec.Data["release"])
	if err != nil {
		t.Fatal(err)
	}
	if rel.Manifest != "" || len(rel.Config) != 0 {
		t.Fatalf("victim's revision was copied into the tenant's record: config %v, manifest %q", rel.Config, rel.Manifest)
	}
	if sec.Labels["status"] != "failed" {
		t.Errorf("the forged record is labelled %q; want failed (in its labels)", sec.Labels["status"])
	}
}
