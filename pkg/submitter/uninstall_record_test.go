package submitter

import (
	"errors"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// A Secret of another release labelled with this release's name and a higher version is
// none of its records. Uninstall took the history's first for the release's latest: with
// other's queued install labelled web v9 it answered 409 (revision 9 pending), with other's
// deployed record so labelled 404 (no web v9 to mark). It now marks web's own revision 2, as
// a cancel finds it (latestRecord), and leaves other alone.
func TestUninstallIgnoresAnotherReleasesSecretLabelledWithItsName(t *testing.T) {
	for what, decoy := range map[string]func(*env) string{
		"queued install": func(e *env) string { return installLabelledAsWeb9(t, e).Secret.Name },
		"deployed record": func(e *env) string {
			e.deploy("other", 1, helmrelease.StatusDeployed)
			relabel(t, e, release.SecretName("other", 1), `{"`+release.LabelName+`":"web","`+release.LabelVersion+`":"9"}`)
			return release.SecretName("other", 1)
		},
	} {
		t.Run(what, func(t *testing.T) {
			e := newEnv(t)
			e.deploy("web", 1, helmrelease.StatusSuperseded)
			e.deploy("web", 2, helmrelease.StatusDeployed)
			name := decoy(e)
			before := e.secret(name)
			acc, err := e.svc.Uninstall(ctx(t), "ns", "web", "", nil)
			if err != nil {
				t.Fatalf("uninstall of web: %v; want its revision 2 marked", err)
			}
			if st, _ := e.status("web", 2); acc.Revision != 2 || acc.Secret.Name != release.SecretName("web", 2) || st != helmrelease.StatusUninstalling {
				t.Errorf("uninstall marked revision %d (%s); web's revision 2 is %s: want 2 uninstalling", acc.Revision, acc.Secret.Name, st)
			}
			if a, err := events.ParseAccepted(e.sender.sent[len(e.sender.sent)-1]); err != nil || a.SecretName != release.SecretName("web", 2) {
				t.Errorf("event %+v, %v; want one for web's revision 2", a, err)
			}
			if after := e.secret(name); after.ResourceVersion != before.ResourceVersion {
				t.Errorf("the decoy %s was written by an uninstall of web", name)
			}
			// Its version label names no record of web either.
			if _, err := e.svc.Uninstall(ctx(t), "ns", "web", "9", nil); !errors.Is(err, ErrRevisionNotFound) {
				t.Errorf("uninstall of web version 9: %v; want revision not found", err)
			}
		})
	}
}

// The console's uninstall of a revision the release does not have answered 404 "release not
// found: ns/web", of a release that exists. Still 404, the message names the revision.
func TestUninstallOfAMissingRevisionNamesIt(t *testing.T) {
	e := newEnv(t)
	e.deploy("web", 1, helmrelease.StatusDeployed)
	_, err := e.svc.Uninstall(ctx(t), "ns", "web", "3", nil)
	if !errors.Is(err, ErrRevisionNotFound) || err.Error() != "revision 3 of ns/web not found" {
		t.Errorf("uninstall of web revision 3: %v; want \"revision 3 of ns/web not found\"", err)
	}
	if _, err := e.svc.Uninstall(ctx(t), "ns", "nope", "3", nil); !errors.Is(err, release.ErrNotFound) || err.Error() != "release: not found: ns/nope" {
		t.Errorf("uninstall of a missing release: %v", err)
	}
}

// relabel merges labels (a JSON object) into a Secret's, as a namespace editor can.
func relabel(t *testing.T, e *env, name, labels string) {
	t.Helper()
	patch := `{"metadata":{"labels":` + labels + `}}`
	if _, err := e.c.CoreV1().Secrets("ns").Patch(ctx(t), name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// secret reads a Secret of namespace ns.
func (e *env) secret(name string) *corev1.Secret {
	e.t.Helper()
	sec, err := e.c.CoreV1().Secrets("ns").Get(ctx(e.t), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return sec
}
