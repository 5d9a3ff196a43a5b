package clustertest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/chart"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/dynamic"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/async-helm/async-helm/pkg/helmexec"
)

// The second install of an executor's factory asks the API server nothing about
// discovery or OpenAPI, though it runs as another identity (impersonation), on either engine.
func TestSecondInstallMakesNoDiscoveryRequests(t *testing.T) {
	for _, engine := range []helmexec.Engine{helmexec.EngineV3, helmexec.EngineV4} {
		t.Run(string(engine), func(t *testing.T) {
			t.Parallel()
			secondInstallMakesNoDiscoveryRequests(t, engine)
		})
	}
}

func secondInstallMakesNoDiscoveryRequests(t *testing.T, engine helmexec.Engine) {
	ns := cluster.Namespace(t)
	var log requestLog
	f, err := helmexec.NewFactory(log.config(), helmexec.WithClock(clocktesting.NewFakePassiveClock(time.Now())), helmexec.WithEngine(engine))
	if err != nil {
		t.Fatal(err)
	}
	run := install
	if engine == helmexec.EngineV4 {
		run = installReserved
	}
	if err := run(t, f, ns, "first", tinyChart(t)); err != nil {
		t.Fatal(err)
	}
	disc, oapi, other := log.counts()
	if len(disc) == 0 || len(oapi) == 0 {
		t.Fatalf("the first install made %d discovery and %d OpenAPI requests: the log does not see them", len(disc), len(oapi))
	}
	t.Logf("first install: %d discovery, %d OpenAPI, %d other requests", len(disc), len(oapi), other)
	as := helmexec.WithImpersonation("ops-alice", "", []string{"system:masters", "system:authenticated"}, nil)
	if err := run(t, f, ns, "second", tinyChart(t), as); err != nil {
		t.Fatal(err)
	}
	disc2, oapi2, other2 := log.counts()
	if d, o := disc2[len(disc):], oapi2[len(oapi):]; len(d) != 0 || len(o) != 0 {
		t.Errorf("the second install made discovery requests %v and OpenAPI requests %v, want none", d, o)
	}
	if other2 == other {
		t.Error("the second install made no request at all")
	}
}

// A chart that creates a CRD (in its templates, or in crds/, which Helm installs first and
// then resets the mapper), then a chart with an object of that kind, through one factory:
// the second finds the kind though the shared discovery was filled before the CRD existed
// (and Helm's per-action invalidation is not due: the clock stands).
func TestAKindFromAnEarlierChartIsFound(t *testing.T) {
	for _, engine := range []helmexec.Engine{helmexec.EngineV3, helmexec.EngineV4} {
		t.Run(string(engine), func(t *testing.T) {
			t.Parallel()
			t.Run("templates", func(t *testing.T) { kindFromAnEarlierChart(t, engine, false) })
			t.Run("crds", func(t *testing.T) { kindFromAnEarlierChart(t, engine, true) })
		})
	}
}

func kindFromAnEarlierChart(t *testing.T, engine helmexec.Engine, inCRDsDir bool) {
	ns := cluster.Namespace(t)
	f, err := helmexec.NewFactory(cluster.Admin, helmexec.WithClock(clocktesting.NewFakePassiveClock(time.Now())), helmexec.WithEngine(engine))
	if err != nil {
		t.Fatal(err)
	}
	install := install
	if engine == helmexec.EngineV4 {
		install = installReserved
	}
	if err := install(t, f, ns, "warm", tinyChart(t)); err != nil { // fills the caches
		t.Fatal(err)
	}
	group := fmt.Sprintf("w%s.async-helm.test", rand.String(6))
	crd := schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}
	dyn := dynamic.NewForConfigOrDie(cluster.Admin)
	t.Cleanup(func() {
		_ = dyn.Resource(crd).Delete(context.Background(), "widgets."+group, metav1.DeleteOptions{})
	})
	crdChart := oneTemplate("crd", crdManifest(group))
	if inCRDsDir {
		crdChart.Templates, crdChart.Files = nil, []*chart.File{{Name: "crds/widgets.yaml", Data: []byte(crdManifest(group))}}
	}
	if err := install(t, f, ns, "crd", crdChart); err != nil {
		t.Fatal(err)
	}
	waitEstablished(t, dyn, crd, "widgets."+group)
	widget := fmt.Sprintf("apiVersion: %s/v1\nkind: Widget\nmetadata:\n  name: w\nspec:\n  size: 3\n", group)
	if err := install(t, f, ns, "uses", oneTemplate("uses", widget)); err != nil {
		t.Fatalf("the chart using the CRD's kind: %v", err)
	}
	got, err := dyn.Resource(schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}).Namespace(ns).
		Get(context.Background(), "w", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if size, _, _ := unstructuredInt(got.Object, "spec", "size"); size != 3 {
		t.Errorf("the widget's size is %d", size)
	}
}

func oneTemplate(name, manifest string) *chart.Chart {
	return &chart.Chart{
		Metadata:  &chart.Metadata{Name: name, Version: "0.1.0", APIVersion: "v2"},
		Templates: []*chart.File{{Name: "templates/all.yaml", Data: []byte(manifest)}},
	}
}

func crdManifest(group string) string {
	return strings.ReplaceAll(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.GROUP
spec:
  group: GROUP
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
`, "GROUP", group)
}

// waitEstablished waits (bounded) until the API server serves the CRD.
func waitEstablished(t *testing.T, dyn dynamic.Interface, crd schema.GroupVersionResource, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		u, err := dyn.Resource(crd).Get(ctx, name, metav1.GetOptions{})
		if err == nil {
			var c apiextensionsv1.CustomResourceDefinition
			if convert(u.Object, &c) == nil {
				for _, cond := range c.Status.Conditions {
					if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
						return
					}
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("CRD %s never established", name)
}
