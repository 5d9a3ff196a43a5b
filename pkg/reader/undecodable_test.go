package reader

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/fakekube"
	"github.com/async-helm/async-helm/pkg/release"
)

// A record that does not decode is left out of a list with limitInfo and logged with its
// decode error, whichever way it was read (listed with its namespace, or fetched alone
// once the index says it changed); its list head is all the list reads of it.
func TestAnUndecodableRecordIsLoggedWithItsError(t *testing.T) {
	for _, withIndex := range []bool{false, true} {
		cl := fakekube.New(fakekube.NewClock(time.Now()))
		helmRecords(t, cl, rel("team", "web", 1, helmrelease.StatusDeployed))
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: release.SecretName("junk", 1), Namespace: "team", Labels: map[string]string{
			release.LabelOwner: release.OwnerHelm, release.LabelName: "junk", release.LabelVersion: "1", release.LabelStatus: "deployed"}},
			Type: "helm.sh/release.v1", Data: map[string][]byte{"release": []byte("not base64!")}}
		if _, err := cl.Typed().CoreV1().Secrets("team").Create(context.Background(), sec, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		core, logs := observer.New(zap.WarnLevel)
		store := &release.Store{Client: cl.Typed(), Metadata: cl.Metadata()}
		s := &Service{Secrets: store, Log: zap.New(core).Sugar()}
		if withIndex {
			s.Index = store
		}
		rows := limitedRows(t, s, nil, "team")
		if len(rows) != 1 || rows[0].Name != "web" {
			t.Errorf("index %v: listed %d rows, want web's only", withIndex, len(rows))
		}
		var errs []string
		for _, e := range logs.All() {
			errs = append(errs, e.ContextMap()["error"].(string))
		}
		if len(errs) != 1 || !strings.Contains(errs[0], "illegal base64") {
			t.Errorf("index %v: logged %q, want the record's decode error", withIndex, errs)
		}
	}
}
