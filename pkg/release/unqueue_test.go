package release

import (
	"strings"
	"testing"

	helmrelease "helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// UnqueueFinal drops the queued label only of a record whose payload is final; a pending
// reservation keeps it (it is still waiting), and a missing record is no error.
func TestUnqueueFinal(t *testing.T) {
	s, c, _ := newStore(t)
	reserve(t, s, "web", ActionInstall, "req-1")
	reserve(t, s, "db", ActionInstall, "req-2")

	// A payload rewritten final with its queued label kept (no Helm adoption did it).
	d := driver.NewSecrets(c.CoreV1().Secrets("ns"))
	rel, err := d.Get(SecretName("web", 1))
	if err != nil {
		t.Fatal(err)
	}
	rel.Info.Status = helmrelease.StatusDeployed
	if err := d.Update(SecretName("web", 1), rel); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name      string
		dropped   bool
		wantLabel string
	}{
		{"web", true, ""},     // final payload: dropped
		{"db", false, "true"}, // still pending: kept
	} {
		got, err := s.UnqueueFinal(ctx(t), "ns", tc.name, 1)
		if err != nil || got != tc.dropped {
			t.Errorf("UnqueueFinal(%s) = %v, %v; want %v", tc.name, got, err, tc.dropped)
		}
		sec, err := c.CoreV1().Secrets("ns").Get(ctx(t), SecretName(tc.name, 1), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if sec.Labels[LabelQueued] != tc.wantLabel {
			t.Errorf("%s: queued label %q, want %q", tc.name, sec.Labels[LabelQueued], tc.wantLabel)
		}
	}
	if got, err := s.UnqueueFinal(ctx(t), "ns", "gone", 1); got || err != nil {
		t.Errorf("UnqueueFinal of a missing record = %v, %v", got, err)
	}
}

// An upgrade reservation whose base (the deployed revision below it) does not decode is
// still failed, keeping its own chart: the base is the tenant's to write, and it kept the
// never-started revision pending and queued for ever (MarkFailed errored on every try).
func TestMarkFailedOfAnUpgradeWhoseBaseDoesNotDecode(t *testing.T) {
	s, c, _ := newStore(t)
	reserve(t, s, "web", ActionInstall, "req-1")
	finish(t, c, "web", 1, helmrelease.StatusDeployed)
	reserve(t, s, "web", ActionUpgrade, "req-2")
	if _, err := c.CoreV1().Secrets("ns").Patch(ctx(t), SecretName("web", 1), types.MergePatchType,
		[]byte(`{"data":{"release":"Z2FyYmFnZQ=="}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	changed, err := s.MarkFailed(ctx(t), "ns", "web", 2, "boom", KeepFailed)
	if err != nil || !changed {
		t.Fatalf("MarkFailed = %v, %v", changed, err)
	}
	sec, err := c.CoreV1().Secrets("ns").Get(ctx(t), SecretName("web", 2), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rel, err := DecodeRelease(sec.Data["release"])
	if err != nil {
		t.Fatal(err)
	}
	if rel.Info.Status != helmrelease.StatusFailed || sec.Labels[LabelQueued] != "" ||
		!strings.Contains(rel.Info.Description, "the revision it started from does not decode") {
		t.Errorf("v2 after MarkFailed: %s %q, queued %q", rel.Info.Status, rel.Info.Description, sec.Labels[LabelQueued])
	}
}
