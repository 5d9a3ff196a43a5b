package release

import (
	"bytes"
	"context"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	helmtime "helm.sh/helm/v3/pkg/time"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// keepCreate keeps what Helm's driver would create.
type keepCreate struct {
	typedcorev1.SecretInterface
	got *corev1.Secret
}

func (k *keepCreate) Create(_ context.Context, s *corev1.Secret, _ metav1.CreateOptions) (*corev1.Secret, error) {
	k.got = s
	return s, nil
}

// The reservation is built without Helm's driver (to reuse the compressor), so it must be
// exactly what the driver writes: same labels, type and bytes.
func TestNewRecordIsWhatHelmsDriverWrites(t *testing.T) {
	now := helmtime.Now()
	for i, rls := range []*helmrelease.Release{
		{Name: "web", Namespace: "ns", Version: 3, Config: map[string]any{"a": []any{1, "x"}},
			Chart:  &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "0.1.0", APIVersion: "v2"}},
			Labels: Labels("req-1", 3, "tiny", "0.1.0"),
			Info:   &helmrelease.Info{FirstDeployed: now, LastDeployed: now, Status: helmrelease.StatusPendingUpgrade, Description: ReservedDescription}},
		{Name: "db", Namespace: "ns", Version: 1, Info: &helmrelease.Info{Status: helmrelease.StatusPendingInstall}},
	} {
		for round := 0; round < 2; round++ { // the second round reuses a pooled compressor
			k := &keepCreate{}
			before := time.Now().Unix()
			if err := driver.NewSecrets(k).Create(SecretName(rls.Name, rls.Version), rls); err != nil {
				t.Fatal(err)
			}
			ours, err := newRecord(SecretName(rls.Name, rls.Version), rls, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			if time.Now().Unix() != before { // createdAt has whole seconds: compare within one
				ours.Labels["createdAt"] = k.got.Labels["createdAt"]
			}
			if ours.Name != k.got.Name || ours.Type != k.got.Type || len(ours.Labels) != len(k.got.Labels) {
				t.Fatalf("record %d: %+v, Helm's %+v", i, ours.ObjectMeta, k.got.ObjectMeta)
			}
			for key, v := range k.got.Labels {
				if ours.Labels[key] != v {
					t.Errorf("record %d: label %s = %q, Helm's %q", i, key, ours.Labels[key], v)
				}
			}
			if len(ours.Data) != 1 || !bytes.Equal(ours.Data["release"], k.got.Data["release"]) {
				t.Errorf("record %d round %d: payload differs from Helm's encoding", i, round)
			}
			var back helmrelease.Release
			if err := DecodeInto(ours.Data["release"], &back); err != nil || back.Name != rls.Name || back.Info.Status != rls.Info.Status {
				t.Errorf("record %d: decodes to %+v, %v", i, back, err)
			}
		}
	}
}
