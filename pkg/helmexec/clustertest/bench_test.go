package clustertest

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/async-helm/async-helm/pkg/helmexec"
)

// BenchmarkTinyInstall is the executor's CPU per install of the tiny chart (a ConfigMap, a
// Deployment, a Job; no wait) through one factory, each install impersonating the caller
// as the executor does: this process's user+system CPU per install (the API server's is
// not counted), and the discovery and OpenAPI requests per install. Issue 28's profiles
// put 37% of the executor's CPU into per-action OpenAPI parsing.
//
//	KUBECONFIG=$PWD/.cache/localcluster/kubeconfig go test -run - -bench TinyInstall -benchtime 40x ./pkg/helmexec/clustertest/
func BenchmarkTinyInstall(b *testing.B) {
	ns := cluster.Namespace(b)
	var log requestLog
	f, err := helmexec.NewFactory(log.config())
	if err != nil {
		b.Fatal(err)
	}
	ch := tinyChart(b)
	as := helmexec.WithImpersonation("bench-caller", "", []string{"system:masters", "system:authenticated"}, nil)
	if err := install(b, f, ns, "warm", ch, as); err != nil { // the executor's first action
		b.Fatal(err)
	}
	disc0, oapi0, _ := log.counts()
	cpu0 := processCPU(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := install(b, f, ns, fmt.Sprintf("t%d", i), ch, as); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	disc, oapi, _ := log.counts()
	b.ReportMetric(float64(processCPU(b)-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/install")
	b.ReportMetric(float64(len(disc)-len(disc0))/float64(b.N), "discovery-req/install")
	b.ReportMetric(float64(len(oapi)-len(oapi0))/float64(b.N), "openapi-req/install")
}

func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
