package release

import (
	"math"
	"strconv"
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
)

// A Secret a namespace editor named sh.helm.release.v1.web.v9223372036854775807, labelled
// as web's newest revision, made the next revision Version+1 wrap to math.MinInt64, and an
// upgrade reserved it. A next revision past MaxRevision is now refused, and nothing written.
func TestNextRevisionPastTheBoundIsRefused(t *testing.T) {
	for _, tc := range []struct {
		decoy int
		want  int // 0: refused
	}{
		{math.MaxInt64, 0},
		{MaxRevision, 0},
		{MaxRevision - 1, MaxRevision},
	} {
		s, c, _ := newStore(t)
		reserve(t, s, "web", ActionInstall, "req-1")
		finish(t, c, "web", 1, helmrelease.StatusDeployed)
		v := strconv.Itoa(tc.decoy)
		decoy := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: SecretName("web", tc.decoy),
			Labels: map[string]string{LabelOwner: OwnerHelm, LabelName: "web", LabelVersion: v, LabelStatus: "deployed"}}}
		if _, err := c.CoreV1().Secrets("ns").Create(ctx(t), decoy, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := s.NextRevision(ctx(t), "ns", "web", ActionUpgrade)
		if tc.want != 0 {
			if got != tc.want || err != nil {
				t.Errorf("after revision %s: NextRevision = %d, %v; want %d", v, got, err, tc.want)
			}
			continue
		}
		if got != 0 || !isErr(err, ErrRevisionRange) {
			t.Errorf("after revision %s: NextRevision = %d, %v; want ErrRevisionRange", v, got, err)
		}
		sec, err := s.Reserve(ctx(t), Reservation{Namespace: "ns", Name: "web", Action: ActionUpgrade, Chart: tiny(), RequestID: "req-2"})
		if sec != nil || !isErr(err, ErrRevisionRange) {
			t.Errorf("after revision %s: Reserve = %v, %v; want ErrRevisionRange", v, sec, err)
		}
		assertNoWrappedRecord(t, c.CoreV1().Secrets("ns"))
	}
}

// A revision a caller computed itself is held to the same bound: a wrapped one is never written.
func TestReserveRefusesARevisionOutOfRange(t *testing.T) {
	s, c, _ := newStore(t)
	for _, rev := range []int{math.MinInt64, -1, MaxRevision + 1, math.MaxInt64} {
		sec, err := s.Reserve(ctx(t), Reservation{Namespace: "ns", Name: "web", Action: ActionUpgrade, Chart: tiny(),
			RequestID: "req-1", Revision: rev})
		if sec != nil || !isErr(err, ErrRevisionRange) {
			t.Errorf("Reserve of revision %d = %v, %v; want ErrRevisionRange", rev, sec, err)
		}
	}
	assertNoWrappedRecord(t, c.CoreV1().Secrets("ns"))
}

// assertNoWrappedRecord fails on any Secret named for a negative revision or one past MaxRevision.
func assertNoWrappedRecord(t *testing.T, secrets typedcorev1.SecretInterface) {
	t.Helper()
	list, err := secrets.List(ctx(t), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range list.Items {
		_, rev, ok := ParseSecretName(sec.Name)
		if strings.Contains(sec.Name, ".v-") || (ok && rev > MaxRevision && sec.Labels[LabelQueued] != "") {
			t.Errorf("reserved %s", sec.Name)
		}
	}
}
