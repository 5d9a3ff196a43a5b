package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/submitclient"
	"github.com/async-helm/async-helm/pkg/valuesfrom"
)

const password = "hunter2-e2e-password"

// A pipeline installs with a password from a Secret through a request CloudEvent: the
// request, the accepted event submit sends through the Broker and every status event carry
// the reference only, the chart gets the password, an upgrade with --reuse-values reads the
// reference again (the rotated password), and a caller who may not get the Secret gets 403
// with nothing reserved. Hostile references are refused with 400 before anything runs.
func TestValuesFromASecretThroughAPipelineEvent(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	// The ledger is the cluster's: other tests' (and benchmarks') queued work must not refuse this one.
	s := newStackWith(t, map[string]string{"MAX_QUEUED": "1000000"}, ns)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		StringData: map[string]string{"values.yaml": "message: " + password + "\n"}}
	if _, err := cluster.Client.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	w, err := cluster.Client.CoreV1().Secrets(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + release.SecretName("web", 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	req := api.ReleaseRequest{Name: "web", Namespace: ns, ChartURL: s.charts.ChartURL("tiny", "0.1.0"),
		ValuesFrom: []valuesfrom.Ref{{Kind: valuesfrom.KindSecret, Name: "db"}}}
	if code := sendRequestEvent(t, s, req, cluster.Operator.BearerToken); code != http.StatusCreated {
		t.Fatalf("request event: HTTP %d, want 201", code)
	}
	sent := firstStoredEvent(t, w)
	if strings.Contains(string(sent), password) || !strings.Contains(string(sent), `"valuesFrom":[{"kind":"Secret","name":"db"}]`) {
		t.Errorf("the accepted event as sent:\n%s", sent)
	}
	waitStatus(t, s, ns, "web", "deployed", time.Minute)
	if msg := configMessage(t, ns); msg != password {
		t.Errorf("the chart rendered message %q, want the Secret's", msg)
	}

	// Rotated, then read again by an upgrade that reuses values.
	sec.StringData = map[string]string{"values.yaml": "message: rotated-" + password + "\n"}
	if _, err := cluster.Client.CoreV1().Secrets(ns).Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out, code := s.ocHelm(t, "-n", ns, "upgrade", "web", "--reuse-values", "--set", "replicas=2", "--wait"); code != 0 {
		t.Fatalf("upgrade --reuse-values: exit %d\n%s", code, out)
	}
	if msg := configMessage(t, ns); msg != "rotated-"+password {
		t.Errorf("after upgrade --reuse-values: message %q", msg)
	}
	rel, err := s.client.Get(ctx, ns, "web")
	if err != nil || rel.Chart.Metadata.Annotations[release.AnnotationValuesFrom] != `[{"kind":"Secret","name":"db","key":"values.yaml"}]` ||
		rel.Config["replicas"] != float64(2) {
		t.Errorf("revision 2 keeps %v (config %v), %v", rel.Chart.Metadata.Annotations, rel.Config, err)
	}
	for _, e := range s.sink.Events() {
		if strings.Contains(string(e.Data()), password) {
			t.Errorf("status event %s carries the password", e.ID())
		}
	}
	refusedValuesFrom(t, s, ns)
}

// refusedValuesFrom: 403 without get on the Secret, 400 for another namespace's Secret, a
// flood of references and a huge ConfigMap; nothing reserved for any.
func refusedValuesFrom(t *testing.T, s *stack, ns string) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "release-writer"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create", "update"}}}}
	if _, err := cluster.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	bindDev(t, ns, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "release-writer"}, "create", "secrets", "")
	req := api.ReleaseRequest{Name: "dev", Namespace: ns, ChartURL: s.charts.ChartURL("tiny", "0.1.0"),
		ValuesFrom: []valuesfrom.Ref{{Kind: valuesfrom.KindSecret, Name: "db"}}}
	if code := sendRequestEvent(t, s, req, cluster.Dev.BearerToken); code != http.StatusForbidden {
		t.Errorf("dev's request event naming Secret db: HTTP %d, want 403", code)
	}
	huge := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "huge", Namespace: ns},
		Data: map[string]string{"values.yaml": "message: " + strings.Repeat("x", 900<<10) + "\n"}}
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Create(ctx, huge, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	flood := make([]valuesfrom.Ref, 1000)
	for i := range flood {
		flood[i] = valuesfrom.Ref{Kind: valuesfrom.KindSecret, Name: "db"}
	}
	for name, refs := range map[string][]valuesfrom.Ref{
		"another namespace's Secret": {{Kind: valuesfrom.KindSecret, Name: "db", Namespace: "kube-system"}},
		"a flood of references":      flood,
		"a huge ConfigMap":           {{Kind: valuesfrom.KindConfigMap, Name: "huge"}},
		"a missing key":              {{Kind: valuesfrom.KindSecret, Name: "db", Key: "nope"}},
	} {
		req := api.ReleaseRequest{Name: "other", Namespace: ns, ChartURL: s.charts.ChartURL("tiny", "0.1.0"), ValuesFrom: refs}
		_, err := s.client.Install(ctx, req)
		var apiErr *submitclient.APIError
		if !errors.As(err, &apiErr) || apiErr.Status != http.StatusBadRequest || !strings.Contains(apiErr.Message, "values_from") {
			t.Errorf("%s: %v, want 400 naming values_from", name, err)
		}
	}
	for _, name := range []string{"dev", "other"} {
		if _, err := cluster.Client.CoreV1().Secrets(ns).Get(ctx, release.SecretName(name, 1), metav1.GetOptions{}); err == nil {
			t.Errorf("a refused request reserved %s", name)
		}
	}
}

// sendRequestEvent sends a pipeline's install request CloudEvent with token and returns the
// HTTP status.
func sendRequestEvent(t *testing.T, s *stack, req api.ReleaseRequest, token string) int {
	t.Helper()
	c, err := cloudevents.NewClientHTTP()
	if err != nil {
		t.Fatal(err)
	}
	e := cloudevents.NewEvent()
	e.SetID("pipeline-" + req.Name)
	e.SetSource("/pipelines/e2e")
	e.SetType(events.TypeInstallRequested)
	if err := e.SetData(cloudevents.ApplicationJSON, req); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(e.Data()), password) {
		t.Fatal("the request event carries the password")
	}
	ctx := cehttp.WithCustomHeader(cloudevents.ContextWithTarget(context.Background(), s.submit.URL+api.PathEvents),
		http.Header{"Authorization": {"Bearer " + token}})
	_, res := c.Request(ctx, e)
	var httpRes *cehttp.Result
	if !cloudevents.ResultAs(res, &httpRes) {
		t.Fatalf("request event: %v", res)
	}
	return httpRes.StatusCode
}

// firstStoredEvent is the accepted event the reservation was created with: the very event
// submit sent to the Broker (docs/design.md, "A 201 is a promise").
func firstStoredEvent(t *testing.T, w watch.Interface) []byte {
	t.Helper()
	for ev := range w.ResultChan() {
		if sec, ok := ev.Object.(*corev1.Secret); ok && ev.Type == watch.Added {
			var e cloudevents.Event
			if err := json.Unmarshal(sec.Data[release.DataEvent], &e); err != nil {
				t.Fatalf("stored event: %v", err)
			}
			return sec.Data[release.DataEvent]
		}
	}
	t.Fatal("no reservation seen")
	return nil
}

func configMessage(t *testing.T, ns string) string {
	t.Helper()
	cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(context.Background(), "web-config", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm.Data["message"]
}
