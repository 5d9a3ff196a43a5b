package executor

import (
	"context"
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/async-helm/async-helm/pkg/release"
)

// relabel merges labels (a nil value removes one) into web v1's Secret, as its namespace's
// editors can.
func (e *env) relabel(labels map[string]*string) {
	e.t.Helper()
	patch := `{"metadata":{"labels":{`
	sep := ""
	for k, v := range labels {
		val := "null"
		if v != nil {
			val = `"` + *v + `"`
		}
		patch += sep + `"` + k + `":` + val
		sep = ","
	}
	if _, err := e.c.CoreV1().Secrets("ns").Patch(ctx(e.t), release.SecretName("web", 1), types.MergePatchType,
		[]byte(patch+`}}}`), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func str(s string) *string { return &s }

// Admission counts a sealed reservation by its queued label, Helm's owner label and its
// seal (release.CountsAsQueued). A namespace editor who rewrites the owner label (the
// index selects on it) or the seal took its reservation out of MAX_QUEUED's count; the work
// must not then run. One whose status or revision label was rewritten (payload still
// pending) still counted until now, so it runs.
func TestRelabelledReservationRunsOnlyIfItStillCounted(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	for _, tc := range []struct {
		name   string
		key    []byte
		labels map[string]*string
		runs   bool
	}{
		{"status label deployed, sealed", key, map[string]*string{release.LabelStatus: str("deployed")}, true},
		{"revision label, sealed", key, map[string]*string{release.LabelRevision: str("9")}, true},
		{"owner label", key, map[string]*string{release.LabelOwner: str("flux")}, false},
		{"seal removed", key, map[string]*string{release.LabelSeal: nil}, false},
		{"seal of another key", key, map[string]*string{release.LabelSeal: str(release.Seal([]byte("other"), "ns", release.SecretName("web", 1), "req-1"))}, false},
		{"status label deployed, no key", nil, map[string]*string{release.LabelStatus: str("deployed")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			e.store.SealKey, e.svc.SealKey = tc.key, tc.key
			a := e.reserve("web", "req-1")
			e.relabel(tc.labels)
			got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
			if err != nil {
				t.Fatal(err)
			}
			st, desc := e.status("web")
			if tc.runs {
				if got != OutcomeDeployed || e.helm.calls.Load() != 1 {
					t.Errorf("%s, Helm ran %d times; want %s, once", got, e.helm.calls.Load(), OutcomeDeployed)
				}
				return
			}
			if got != OutcomeFailed || e.helm.calls.Load() != 0 {
				t.Errorf("%s, Helm ran %d times; want %s, unrun", got, e.helm.calls.Load(), OutcomeFailed)
			}
			if st != helmrelease.StatusFailed || !strings.Contains(desc, "relabelled out of the queued count") {
				t.Errorf("record %s %q", st, desc)
			}
		})
	}
}
