package submitter

import (
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// An uninstall's no_hooks reaches the executor in the signed event, and the mark keeps the
// record's seal of who wrote its hooks (the uninstall runs them as that identity).
func TestUninstallCarriesNoHooksAndTheSeal(t *testing.T) {
	for _, noHooks := range []bool{false, true} {
		e := newEnv(t)
		e.deploy("web", 1, helmrelease.StatusDeployed)
		secrets := e.c.CoreV1().Secrets("ns")
		sec, err := secrets.Get(ctx(t), release.SecretName("web", 1), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		sec.Data[release.DataDeployer] = []byte(`{"user":"deployer","hooks":"sha256:1","sig":"x"}`)
		if _, err := secrets.Update(ctx(t), sec, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := e.svc.Uninstall(ctx(t), "ns", "web", "", nil, api.UninstallOptions{NoHooks: noHooks}); err != nil {
			t.Fatal(err)
		}
		a, err := events.ParseAccepted(e.sender.sent[0])
		if err != nil || a.Options.NoHooks != noHooks {
			t.Errorf("no_hooks %v: the event says %v (%v)", noHooks, a.Options.NoHooks, err)
		}
		marked, err := secrets.Get(ctx(t), release.SecretName("web", 1), metav1.GetOptions{})
		if err != nil || string(marked.Data[release.DataDeployer]) != string(sec.Data[release.DataDeployer]) || marked.Labels["status"] != "uninstalling" {
			t.Errorf("marked %v: seal %q, %v", marked.Labels, marked.Data[release.DataDeployer], err)
		}
	}
}
