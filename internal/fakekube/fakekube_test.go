package fakekube

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
)

var t0 = time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)

// The behaviours of an API server the product's compare-and-swaps rely on.
func TestAPIServerSemantics(t *testing.T) {
	ctx := context.Background()
	clock := NewClock(t0)
	c := New(clock, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns"}})
	secrets := c.CoreV1().Secrets("ns")
	s, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"owner": "helm"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if s.UID == "" || s.ResourceVersion == "" || !s.CreationTimestamp.Time.Equal(t0) {
		t.Fatalf("created %+v", s.ObjectMeta)
	}
	stale := s.DeepCopy()
	s.Labels["x"] = "1"
	s, err = secrets.Update(ctx, s, metav1.UpdateOptions{})
	if err != nil || s.ResourceVersion == stale.ResourceVersion {
		t.Fatalf("update: %v, rv %s", err, s.ResourceVersion)
	}
	if _, err := secrets.Update(ctx, stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("stale update: %v", err)
	}
	// An update that carries no UID (Helm's driver builds its Secret anew) keeps the object's.
	anew := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: s.Labels}}
	if u, err := secrets.Update(ctx, anew, metav1.UpdateOptions{}); err != nil || u.UID != s.UID || !u.CreationTimestamp.Equal(&s.CreationTimestamp) {
		t.Fatalf("update without a UID: %v, uid %q (was %q)", err, u.UID, s.UID)
	}
	if s, err = secrets.Get(ctx, "a", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
	patch := `{"metadata":{"resourceVersion":"` + stale.ResourceVersion + `","annotations":{"a":"b"}}}`
	if _, err := secrets.Patch(ctx, "a", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); !apierrors.IsConflict(err) {
		t.Errorf("stale patch: %v", err)
	}
	patch = `{"metadata":{"resourceVersion":"` + s.ResourceVersion + `","annotations":{"a":"b"},"labels":{"x":null}}}`
	p, err := secrets.Patch(ctx, "a", types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	if err != nil || p.Annotations["a"] != "b" || p.Labels["x"] != "" || p.Labels["owner"] != "helm" || p.ResourceVersion == s.ResourceVersion {
		t.Fatalf("patch: %v %+v", err, p.ObjectMeta)
	}
	other := types.UID("other")
	if err := secrets.Delete(ctx, "a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &other}}); !apierrors.IsConflict(err) {
		t.Errorf("delete with a foreign UID: %v", err)
	}
	if err := secrets.Delete(ctx, "a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &s.ResourceVersion}}); !apierrors.IsConflict(err) {
		t.Errorf("delete with a stale resourceVersion: %v", err)
	}
	c.Fail("delete", "secrets", errors.New("down"))
	if err := secrets.Delete(ctx, "a", metav1.DeleteOptions{}); err == nil || err.Error() != "down" {
		t.Errorf("injected failure: %v", err)
	}
	c.Fail("delete", "secrets", nil)
	if err := secrets.Delete(ctx, "a", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &p.UID}}); err != nil {
		t.Errorf("delete with its own UID: %v", err)
	}
	clock.Add(time.Minute)
	if !clock.Now().Equal(t0.Add(time.Minute)) {
		t.Error("clock")
	}
}

func TestMetadataClient(t *testing.T) {
	ctx := context.Background()
	c := New(NewClock(t0))
	for _, s := range []*corev1.Secret{
		{ObjectMeta: metav1.ObjectMeta{Name: "a", Namespace: "ns", Labels: map[string]string{"owner": "helm", "status": "deployed"}}, Data: map[string][]byte{"release": []byte("big")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ns", Labels: map[string]string{"owner": "helm", "status": "pending-install"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "other", Labels: map[string]string{"owner": "flux"}}},
	} {
		if _, err := c.CoreV1().Secrets(s.Namespace).Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	md := c.Metadata().Resource(schema.GroupVersionResource{Version: "v1", Resource: "secrets"})
	l, err := md.List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,status in (pending-install)"})
	if err != nil || len(l.Items) != 1 || l.Items[0].Name != "b" {
		t.Fatalf("list: %v %v", err, l)
	}
	m, err := md.Namespace("ns").Get(ctx, "a", metav1.GetOptions{})
	if err != nil || m.Kind != "Secret" || m.Labels["status"] != "deployed" {
		t.Fatalf("get: %v %+v", err, m)
	}
	if _, err := c.Metadata().Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).List(ctx, metav1.ListOptions{}); err == nil {
		t.Error("metadata of another resource")
	}
}
