package storage

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// KeepData puts the entry on the writes of its Secret while While holds, and on no other.
func TestKeepData(t *testing.T) {
	secrets := fake.NewSimpleClientset().CoreV1().Secrets("ns")
	pending := func(l map[string]string) bool { return l["status"] == "pending" }
	if KeepData(secrets, Keep{Secret: "x", Key: "ev", While: pending}) != secrets {
		t.Error("without a value the client must not be wrapped")
	}
	si := KeepData(secrets, Keep{Secret: "web", Key: "ev", Value: []byte("EV"), While: pending})
	write := func(name, status string, create bool) string {
		t.Helper()
		// No Data at all: the keeper makes the map.
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"status": status}}}
		var err error
		if create {
			_, err = si.Create(context.Background(), s, metav1.CreateOptions{})
		} else {
			_, err = si.Update(context.Background(), s, metav1.UpdateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
		got, err := secrets.Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return string(got.Data["ev"])
	}
	if got := write("web", "pending", true); got != "EV" {
		t.Errorf("create while pending kept %q", got)
	}
	if got := write("db", "pending", true); got != "" {
		t.Errorf("another secret got %q", got)
	}
	if got := write("web", "pending", false); got != "EV" {
		t.Errorf("a pending rewrite kept %q", got)
	}
	if got := write("web", "deployed", false); got != "" {
		t.Errorf("the final write kept %q", got)
	}
}
