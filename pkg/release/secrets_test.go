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
func TestReleaseSecretsKeepEachRecordsListHeadOnly(t *testing.T) {
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
	got, err := s.ReleaseSecrets(ctx(t), "tenant")
	if err != nil {
		t.Fatal(err)
	}
	held, decoded := 0, 0
	for _, sec := range got {
		p := sec.Data["release"]
		held += len(p)
		h, err := DecodeListHead(p)
		if err != nil {
			continue // junk: left out of the list
		}
		if sec.Name != SecretName(h.Name, h.Version) || h.Namespace != "tenant" || h.Info.Status != helmrelease.StatusDeployed ||
			h.Info.Description != "Install complete" || h.Chart.Metadata.Name != "tiny" || h.Chart.Metadata.AppVersion != "1.0" {
			t.Errorf("%s: the kept head lost what a list shows: %+v %+v %+v", sec.Name, h, h.Info, h.Chart.Metadata)
		}
		decoded++
	}
	t.Logf("%d junk Secrets of %d KiB and %d records with %d MiB of notes: the list kept %d KiB of payloads", junk, len(raw)*4/3>>10,
		records, len(notes)>>20, held>>10)
	if len(got) != junk+records || decoded != records {
		t.Errorf("listed %d Secrets (want %d), %d heads decoded (want %d)", len(got), junk+records, decoded, records)
	}
	if held > records*(2*MaxHeadDescription+8*MaxHeadField) {
		t.Errorf("one list of the namespace kept %d KiB of its Secrets' payloads", held>>10)
	}
}
