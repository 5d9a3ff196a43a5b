package release

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/chart"
	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A namespace's release Secrets hold what their writer put there (junk up to the API
// server's 1 MiB, records with megabytes of notes): a list of them keeps each one's list
// head only, a few KiB, never their payloads.
func TestReleaseHeadsKeepEachRecordsListHeadOnly(t *testing.T) {
	s, c, _ := newStore(t)
	const junk, records = 120, 3
	labels := func(name string) map[string]string {
		return map[string]string{LabelOwner: OwnerHelm, LabelName: name, LabelVersion: "1", LabelStatus: "deployed"}
	}
	create := func(name string, payload []byte) {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant", Name: SecretName(name, 1), Labels: labels(name)},
			Type: SecretType, Data: map[string][]byte{"release": payload}}
		if _, err := c.Typed().CoreV1().Secrets("tenant").Create(ctx(t), sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	raw := make([]byte, 192<<10)
	for i := range junk {
		_, _ = rand.Read(raw)
		create(fmt.Sprintf("junk%d", i), []byte(base64.StdEncoding.EncodeToString(raw)))
	}
	notes := strings.Repeat("n", 4<<20)
	for i := range records {
		name := fmt.Sprintf("app%d", i)
		payload, err := EncodeRelease(&helmrelease.Release{Name: name, Namespace: "tenant", Version: 1, Manifest: notes,
			Info:  &helmrelease.Info{Status: helmrelease.StatusDeployed, Notes: notes, Description: "Install complete"},
			Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "tiny", Version: "0.1.0", AppVersion: "1.0", Annotations: map[string]string{"a": notes}}}})
		if err != nil {
			t.Fatal(err)
		}
		create(name, payload)
	}
	got, err := s.ReleaseHeads(ctx(t), "tenant")
	if err != nil {
		t.Fatal(err)
	}
	decoded := 0
	for _, h := range got {
		if h.Err != nil {
			continue // junk: left out of the list
		}
		r := h.Release
		if h.Name != SecretName(r.Name, r.Version) || r.Namespace != "tenant" || r.Info.Status != helmrelease.StatusDeployed ||
			r.Info.Description != "Install complete" || r.Chart.Metadata.Name != "tiny" || r.Chart.Metadata.AppVersion != "1.0" {
			t.Errorf("%s: the kept head lost what a list shows: %+v %+v %+v", h.Name, r, r.Info, r.Chart.Metadata)
		}
		if len(r.Info.Notes)+len(r.Manifest)+len(r.Chart.Metadata.Annotations) != 0 {
			t.Errorf("%s: the kept head holds notes, manifest or annotations", h.Name)
		}
		decoded++
	}
	if len(got) != junk+records || decoded != records {
		t.Errorf("listed %d Secrets (want %d), %d heads decoded (want %d)", len(got), junk+records, decoded, records)
	}
}
