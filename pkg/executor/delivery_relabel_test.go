package executor

import (
	"context"
	"testing"

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

// Admission counts the ledger, not the record's labels: a namespace editor who rewrites the
// labels of its reservation frees nothing, and the work it was accepted for runs.
func TestRelabelledReservationStillRuns(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	for _, tc := range []struct {
		name   string
		key    []byte
		labels map[string]*string
	}{
		{"status label deployed", key, map[string]*string{release.LabelStatus: str("deployed")}},
		{"revision label", key, map[string]*string{release.LabelRevision: str("9")}},
		{"queued label dropped", key, map[string]*string{release.LabelQueued: nil}},
		{"owner label", key, map[string]*string{release.LabelOwner: str("flux")}},
		{"seal removed", key, map[string]*string{release.LabelSeal: nil}},
		{"status label deployed, no key", nil, map[string]*string{release.LabelStatus: str("deployed")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, 1)
			e.store.SealKey, e.svc.SealKey = tc.key, tc.key
			a := e.reserve("web", "req-1")
			e.relabel(tc.labels)
			got, err := e.svc.Handle(ctx(t), context.Background(), a, nil)
			if err != nil || got != OutcomeDeployed || e.helm.calls.Load() != 1 {
				t.Errorf("%s, %v, Helm ran %d times; want %s, once", got, err, e.helm.calls.Load(), OutcomeDeployed)
			}
		})
	}
}
