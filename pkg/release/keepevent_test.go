package release

import (
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/fakekube"
)

// KeepEvent puts the stored event back on every pending write of the revision, and
// never on its final write or on other secrets.
func TestKeepEvent(t *testing.T) {
	c := fakekube.New(fakekube.NewClock(t0))
	secrets := c.CoreV1().Secrets("ns")
	if KeepEvent(secrets, "x", nil) != secrets {
		t.Error("without an event the client must not be wrapped")
	}
	si := KeepEvent(secrets, SecretName("web", 1), []byte("EV"))
	d := driver.NewSecrets(si)
	rel := &helmrelease.Release{Name: "web", Namespace: "ns", Version: 1, Info: &helmrelease.Info{Status: helmrelease.StatusPendingInstall}}
	if err := d.Create(SecretName("web", 1), rel); err != nil {
		t.Fatal(err)
	}
	other := &helmrelease.Release{Name: "db", Namespace: "ns", Version: 1, Info: &helmrelease.Info{Status: helmrelease.StatusPendingInstall}}
	if err := d.Create(SecretName("db", 1), other); err != nil {
		t.Fatal(err)
	}
	event := func(name string) string {
		s, err := secrets.Get(ctx(t), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return string(s.Data[DataEvent])
	}
	if event(SecretName("web", 1)) != "EV" || event(SecretName("db", 1)) != "" {
		t.Errorf("after create: web %q, db %q", event(SecretName("web", 1)), event(SecretName("db", 1)))
	}
	rel.Info.Status = helmrelease.StatusPendingInstall
	if err := d.Update(SecretName("web", 1), rel); err != nil {
		t.Fatal(err)
	}
	if event(SecretName("web", 1)) != "EV" {
		t.Error("a pending rewrite dropped the event")
	}
	rel.Info.Status = helmrelease.StatusDeployed
	if err := d.Update(SecretName("web", 1), rel); err != nil {
		t.Fatal(err)
	}
	if event(SecretName("web", 1)) != "" {
		t.Error("the final write kept the event")
	}
}
