package helmexec

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	"github.com/fluxcd/cli-utils/pkg/kstatus/status"
	kube4 "helm.sh/helm/v4/pkg/kube"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/resource"
)

// A v4 wait on one unready object reads the ready ones it waits for twice (once found
// ready, once more with all), not on every poll: a tenant's large Secrets beside a pod that
// never gets ready cost each wait two reads of them, not one every 2 s.
func TestAV4WaitDoesNotRereadWhatIsReady(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		reads := map[string]int{}
		var r kube4.ResourceList
		for _, name := range []string{"s0", "s1", "s2", "s3", "slow"} {
			r = append(r, &resource.Info{Name: name, Namespace: "mallory",
				Mapping: &meta.RESTMapping{GroupVersionKind: corev1.SchemeGroupVersion.WithKind("Secret")}})
		}
		w := polledWaiter{ctx: context.Background(), get: func(info *resource.Info) (runtime.Object, error) {
			reads[info.Name]++
			return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: info.Name}}, nil
		}}
		slowFor := 5 // polls
		judge := func(u *unstructured.Unstructured) (*status.Result, error) {
			if u.GetName() == "slow" && reads["slow"] < slowFor {
				return &status.Result{Status: status.InProgressStatus, Message: "not yet"}, nil
			}
			return &status.Result{Status: status.CurrentStatus}, nil
		}
		if err := w.poll(r, time.Minute, false, judge); err != nil {
			t.Fatal(err)
		}
		for _, name := range []string{"s0", "s1", "s2", "s3"} {
			if reads[name] > 2 {
				t.Errorf("%s, ready from the first poll, was read %d times while slow took %d polls, want at most 2", name, reads[name], slowFor)
			}
		}
		if reads["slow"] < slowFor {
			t.Errorf("slow read %d times, want %d", reads["slow"], slowFor)
		}
	})
}
