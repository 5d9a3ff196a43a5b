package helmexec

import (
	"io"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/async-helm/async-helm/pkg/release"
)

// sealedInstall installs web v1 with a delete hook as alice (scoped token, credential id)
// into a reservation of UID u1, and answers the record's seal entry as written.
func sealedInstall(t *testing.T) []byte {
	t.Helper()
	si, key := reservedWebOfUID(t)
	f, err := NewFactory(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	ch := tiny("1.0.0")
	ch.Templates = append(ch.Templates, &chart.File{Name: "templates/hook.yaml", Data: []byte(preDeleteHook)})
	opts := []Option{withSecrets(si), WithCapabilities(chartutil.DefaultCapabilities), WithKubeClient(&kubefake.PrintingKubeClient{Out: io.Discard}),
		WithImpersonation("alice", "a1-uid", []string{"devs-group"}, map[string][]string{
			"scopes.authorization.openshift.io":          {"user:full"},
			"authentication.kubernetes.io/credential-id": {"JTI=7d3c"}}),
		WithDeployerSeal(SealFor(hooksKey, "ns", "web", 1, "u1"))}
	if _, err := f.Install(ctx(t), Request{Namespace: "ns", Name: "web", Revision: 1, Chart: ch, Timeout: time.Minute}, opts...); err != nil {
		t.Fatal(err)
	}
	got, err := si.Get(ctx(t), key, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Data[release.DataDeployer]) == 0 {
		t.Fatal("the install wrote no seal")
	}
	return got.Data[release.DataDeployer]
}

// Whoever may read the namespace's Secrets reads the seal: it shows nothing of the
// deployer's identity (name, uid, groups, scopes, a token's credential id), only what the
// uninstall's check needs.
func TestTheSealShowsNoIdentity(t *testing.T) {
	raw := string(sealedInstall(t))
	for _, secret := range []string{"alice", "a1-uid", "devs-group", "user:full", "JTI=7d3c", "credential-id", "scopes"} {
		if strings.Contains(raw, secret) {
			t.Errorf("the seal shows %q: %s", secret, raw)
		}
	}
}
