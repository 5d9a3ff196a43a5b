package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"time"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/helmexec"
	"github.com/async-helm/async-helm/pkg/release"
)

// consoleSection: the OpenShift console's async install starts Helm's Install in the
// background and answers when Helm's own pending-install record exists. Here: the time
// from the request (chart download included, a fresh action configuration as the console
// builds per request) until that record exists, installing GitLab with the Helm SDK,
// against submit's cold time-to-201 for the same chart (a fresh submit, chart not cached).
func (b *bench) consoleSection(ctx context.Context) error {
	if len(b.gitlabCold) == 0 {
		if err := b.chartCache(ctx); err != nil {
			return err
		}
	}
	values, err := chartutil.ReadValuesFile(filepath.Join(b.o.charts, "gitlab-values-offline.yaml"))
	if err != nil {
		return err
	}
	var sdk []sample
	for run := 0; run < b.o.consoleRuns; run++ {
		d, err := b.sdkTimeToPending(ctx, fmt.Sprintf("gitlab%d", run), values)
		if err != nil {
			return err
		}
		sdk = append(sdk, sample{d: d})
	}
	ours, helm := summarize(b.gitlabCold, 0), summarize(sdk, 0)
	b.compare("console", "GitLab, cold: time-to-201 p50", msF(ours.p50), "Helm SDK time to its pending record p50", msF(helm.p50),
		"<= 0.05x", atMost(0.05), fmt.Sprintf("%s; SDK n=%d", ours.note(), helm.n))
	return nil
}

func (b *bench) sdkTimeToPending(ctx context.Context, name string, values map[string]any) (time.Duration, error) {
	ns, cleanup, err := b.namespace(ctx, "console")
	if err != nil {
		return 0, err
	}
	defer cleanup()
	// The chart creates cluster-scoped RBAC named after the release: remove what got created.
	defer func() {
		sel := metav1.ListOptions{LabelSelector: "release=" + name}
		_ = b.cl.Typed.RbacV1().ClusterRoleBindings().DeleteCollection(context.Background(), metav1.DeleteOptions{}, sel)
		_ = b.cl.Typed.RbacV1().ClusterRoles().DeleteCollection(context.Background(), metav1.DeleteOptions{}, sel)
	}()
	secrets := b.cl.Typed.CoreV1().Secrets(ns)
	t0 := time.Now()
	resp, err := http.Get(b.charts.ChartURL("gitlab", "6.5.4"))
	if err != nil {
		return 0, err
	}
	archive, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return 0, err
	}
	ch, err := loader.LoadArchive(bytes.NewReader(archive))
	if err != nil {
		return 0, err
	}
	f, err := helmexec.NewFactory(b.cl.Config)
	if err != nil {
		return 0, err
	}
	cfg, err := f.Configuration(ns)
	if err != nil {
		return 0, err
	}
	inst := action.NewInstall(cfg)
	inst.ReleaseName, inst.Namespace, inst.Timeout = name, ns, 5*time.Minute
	actx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() {
		_, err := inst.RunWithContext(actx, ch, values)
		done <- err
	}()
	defer func() {
		cancel()
		select { // Helm winds down on the cancelled context; do not wait for its hooks
		case <-done:
		case <-time.After(30 * time.Second):
		}
	}()
	key := release.SecretName(name, 1)
	for {
		_, err := secrets.Get(ctx, key, metav1.GetOptions{})
		if err == nil {
			return time.Since(t0), nil
		}
		if !apierrors.IsNotFound(err) {
			return 0, err
		}
		select {
		case err := <-done:
			return 0, fmt.Errorf("helm install of %s ended before its pending record was seen: %v", name, err)
		case <-time.After(5 * time.Millisecond):
		case <-ctx.Done():
			return 0, ctx.Err()
		}
	}
}
