package testcluster

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/kube"
	helmstorage "helm.sh/helm/v3/pkg/storage"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"

	"github.com/async-helm/async-helm/internal/testwait"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

var env *Env

func TestMain(m *testing.M) {
	env = MustStart()
	os.Exit(m.Run())
}

// The local cluster behaves as a real one for what async-helm needs: Deployments become
// Available, Jobs complete, Helm's --wait and --wait-for-jobs return, RBAC refuses.
func TestLocalClusterIsReal(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	labels := map[string]string{"app": "web"}
	one := int32(1)
	_, err := env.Client.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Within(t, time.Minute, "the Deployment to be Available", func() bool {
		d, err := env.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue {
				return true
			}
		}
		return false
	})

	_, err = env.Client.BatchV1().Jobs(ns).Create(ctx, &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Name: "once"},
		Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "once", Image: "busybox"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	testwait.Within(t, time.Minute, "the Job to complete", func() bool {
		j, err := env.Client.BatchV1().Jobs(ns).Get(ctx, "once", metav1.GetOptions{})
		return err == nil && j.Status.Succeeded == 1
	})

	// Helm's SDK, as a user would run it: install --wait --wait-for-jobs.
	root, err := RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	ch, err := loader.LoadDir(filepath.Join(root, "testdata", "charts", "tiny"))
	if err != nil {
		t.Fatal(err)
	}
	flags := genericclioptions.NewConfigFlags(false)
	flags.KubeConfig, flags.Namespace = &env.Kubeconfig, &ns
	kc := kube.New(flags)
	kc.Namespace = ns
	cfg := &action.Configuration{RESTClientGetter: flags, KubeClient: kc, Log: func(string, ...any) {},
		Releases: helmstorage.Init(storage.NewSecrets(env.Client.CoreV1().Secrets(ns)))}
	install := action.NewInstall(cfg)
	install.ReleaseName, install.Namespace = "small", ns
	install.Wait, install.WaitForJobs, install.Timeout = true, true, 2*time.Minute
	if _, err := install.Run(ch, nil); err != nil {
		t.Fatalf("helm install --wait --wait-for-jobs: %v", err)
	}
	sec, err := env.Client.CoreV1().Secrets(ns).Get(ctx, "sh.helm.release.v1.small.v1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range map[string]string{"owner": "helm", "name": "small", "status": "deployed", "version": "1"} {
		if sec.Labels[k] != v {
			t.Errorf("release secret label %s=%q, want %q", k, sec.Labels[k], v)
		}
	}

	// The ordinary user dev has no rights until a test grants them.
	dev, err := kubernetes.NewForConfig(env.Dev)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dev.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("dev lists secrets: %v, want Forbidden", err)
	}
	if _, err := dev.AppsV1().Deployments(ns).Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("dev creates a Deployment: %v, want Forbidden", err)
	}
}
