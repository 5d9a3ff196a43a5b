package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/lease"
)

var update = flag.Bool("update", false, "rewrite the golden files of e2e/testdata")

// unbounded turns submit's admission bound off: it counts queued revisions in the whole
// shared cluster, where other suites (benchmarks) may have thousands; these tests are not
// about admission.
var unbounded = map[string]string{"MAX_QUEUED": "0", "MAX_QUEUED_PER_NAMESPACE": "0"}

// Rollback and uninstall through the built oc-helm: a rollback reaches deployed with the
// old values; list shows pending-rollback and uninstalling while the executor is down (the
// broker's redelivery drives them when it is back); then the release and every resource are
// gone, and the uninstall ran once although its event was delivered again.
func TestOcHelmRollbackAndUninstall(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	s := newStackWith(t, unbounded, ns)
	ctx := context.Background()
	tiny := s.charts.ChartURL("tiny", "0.1.0")

	if out, code := s.ocHelm(t, "-n", ns, "install", "web", tiny, "--set", "message=one", "--wait"); code != 0 {
		t.Fatalf("install: exit %d\n%s", code, out)
	}
	if out, code := s.ocHelm(t, "-n", ns, "upgrade", "web", tiny, "--set", "message=two", "--wait"); code != 0 {
		t.Fatalf("upgrade: exit %d\n%s", code, out)
	}
	out, code := s.ocHelm(t, "-n", ns, "rollback", "web", "1", "--wait")
	if code != 0 || !strings.Contains(out, "REVISION: 3") || !strings.Contains(out, "STATUS: pending-rollback") ||
		!strings.Contains(out, "web: deployed, revision 3") {
		t.Fatalf("rollback --wait: exit %d\n%s", code, out)
	}
	cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "web-config", metav1.GetOptions{})
	if err != nil || cm.Data["message"] != "one" {
		t.Errorf("message after the rollback: %v %v", cm.Data, err)
	}
	rel, err := s.client.Get(ctx, ns, "web")
	if err != nil || rel.Version != 3 || rel.Config["message"] != "one" || rel.Info.Description != "Rollback to 1" {
		t.Fatalf("after the rollback: %+v %v", rel, err)
	}
	sec3, err := cluster.Client.CoreV1().Secrets(ns).Get(ctx, release.SecretName("web", 3), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	rid := sec3.Labels[release.LabelRequestID]
	if sec3.Labels[release.LabelRevision] != "3" || rid == "" {
		t.Errorf("the rollback revision carries labels %v, want its own request's", sec3.Labels)
	}
	s.sink.WaitFor(t, 30*time.Second, "pending-rollback then deployed of web v3", func(e []cloudevents.Event) bool {
		p, d := index(e, events.StatusEventID(ns, "web", 3, "pending-rollback", rid)), index(e, events.StatusEventID(ns, "web", 3, "deployed", rid))
		return p >= 0 && d > p
	})

	// The executor is down: a rollback is accepted and list shows it pending-rollback; the
	// broker's redelivery runs it once the executor is back.
	s.executor.Stop()
	if out, code := s.ocHelm(t, "-n", ns, "rollback", "web", "2"); code != 0 || !strings.Contains(out, "REVISION: 4") {
		t.Fatalf("rollback to 2: exit %d\n%s", code, out)
	}
	out, _ = s.ocHelm(t, "-n", ns, "list")
	if !regexpLine(out, "web", ns, "4", "pending-rollback", "tiny-0.1.0") {
		t.Errorf("list while the rollback waits:\n%s", out)
	}
	if err := s.executor.Restart(); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, s, ns, "web", "deployed", 90*time.Second)
	if cm, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "web-config", metav1.GetOptions{}); err != nil || cm.Data["message"] != "two" {
		t.Errorf("message after the rollback to 2: %v %v", cm.Data, err)
	}

	// The executor is down: the uninstall is accepted and shows in list, pending.
	s.executor.Stop()
	out, code = s.ocHelm(t, "-n", ns, "uninstall", "web")
	if code != 0 || !strings.Contains(out, "uninstalling") {
		t.Fatalf("uninstall: exit %d\n%s", code, out)
	}
	marked, err := cluster.Client.CoreV1().Secrets(ns).Get(ctx, release.SecretName("web", 4), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored := marked.Data[release.DataEvent] // the signed uninstall event, as the sweeper would re-send it
	if len(stored) == 0 || marked.Labels[release.LabelQueued] != "true" {
		t.Fatalf("the marked revision holds no event or is not queued: %v", marked.Labels)
	}
	out, _ = s.ocHelm(t, "-n", ns, "list")
	if !regexpLine(out, "web", ns, "4", "uninstalling", "tiny-0.1.0") {
		t.Errorf("list while the uninstall waits:\n%s", out)
	}
	if out, code := s.ocHelm(t, "-n", ns, "upgrade", "web", tiny); code == 0 || !strings.Contains(out, "(HTTP 409)") {
		t.Errorf("upgrade while uninstalling: exit %d\n%s", code, out)
	}
	if err := s.executor.Restart(); err != nil {
		t.Fatal(err)
	}
	// The broker redelivers (backoff 2 s, 4 s, ...); the release goes.
	waitGone(t, s, ns, "web", 90*time.Second)
	if _, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment web after the uninstall: %v", err)
	}
	if _, err := cluster.Client.CoreV1().ConfigMaps(ns).Get(ctx, "web-config", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap web-config after the uninstall: %v", err)
	}
	for _, kind := range []string{"jobs", "secrets"} {
		var n int
		switch kind {
		case "jobs":
			l, err := cluster.Client.BatchV1().Jobs(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			n = len(l.Items)
		case "secrets":
			l, err := cluster.Client.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{LabelSelector: release.SelectorRelease("web")})
			if err != nil {
				t.Fatal(err)
			}
			n = len(l.Items)
		}
		if n != 0 {
			t.Errorf("%d %s left after the uninstall", n, kind)
		}
	}
	evs := s.sink.WaitFor(t, 30*time.Second, "uninstalled of web", func(e []cloudevents.Event) bool {
		for _, ev := range e {
			if ev.Type() == events.TypeStatusPrefix+events.StatusUninstalled && ev.Subject() == ns+"/web" {
				return true
			}
		}
		return false
	})
	var uninstalling, uninstalled int = -1, -1
	for i, ev := range evs {
		switch {
		case ev.Subject() != ns+"/web":
		case ev.Type() == events.TypeStatusPrefix+"uninstalling" && uninstalling < 0:
			uninstalling = i
		case ev.Type() == events.TypeStatusPrefix+events.StatusUninstalled:
			uninstalled = i
		}
	}
	if uninstalling < 0 || uninstalled < uninstalling {
		t.Errorf("uninstalling at %d, uninstalled at %d", uninstalling, uninstalled)
	}
	// A redelivery of the same signed event after the end is acknowledged and runs nothing.
	resp, err := http.Post(s.executor.URL+"/", "application/cloudevents+json", bytes.NewReader(stored))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("redelivered uninstall event: %d", resp.StatusCode)
	}
	// Once, although the broker delivered it more than once.
	want := `asynchelm_executor_actions_total{action="uninstall",outcome="uninstalled"} 1`
	if m := metrics(t, s.executor.URL); !strings.Contains(m, want) {
		t.Errorf("executor metrics lack %s:\n%s", want, grep(m, "actions_total"))
	}

	// --wait follows an uninstall until the release is gone. The notifier is down for the
	// whole of it: "uninstalled" comes when it is back, from the executor's tombstone.
	if out, code := s.ocHelm(t, "-n", ns, "install", "db", tiny, "--wait"); code != 0 {
		t.Fatalf("install db: exit %d\n%s", code, out)
	}
	s.notifier.Stop()
	out, code = s.ocHelm(t, "-n", ns, "uninstall", "db", "--wait")
	if code != 0 || !strings.Contains(out, "db: uninstalled") {
		t.Fatalf("uninstall --wait: exit %d\n%s", code, out)
	}
	if _, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, "db", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment db after uninstall --wait: %v", err)
	}
	// The release is gone once Helm deleted its records; the executor writes the outcome
	// on the tombstone just after, so --wait may return first.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		graves, err := cluster.Client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{LabelSelector: lease.SelectorTombstones})
		if err == nil && len(graves.Items) == 1 && graves.Items[0].Annotations[lease.AnnotationOutcome] == lease.OutcomeUninstalled {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("db's tombstone while the notifier is down: %v, %v", graves, err)
		}
	}
	if err := s.notifier.Restart(); err != nil {
		t.Fatal(err)
	}
	isDB := func(ev cloudevents.Event) bool {
		return ev.Type() == events.TypeStatusPrefix+events.StatusUninstalled && ev.Subject() == ns+"/db"
	}
	s.sink.WaitFor(t, 60*time.Second, "uninstalled of db after the notifier's restart", func(e []cloudevents.Event) bool {
		for _, ev := range e {
			if isDB(ev) {
				return true
			}
		}
		return false
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		l, err := cluster.Client.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
		if err == nil && len(l.Items) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("leases left after uninstalled was reported: %v, %v", l, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	n := 0
	for _, ev := range s.sink.Events() {
		if isDB(ev) {
			n++
			if c, err := events.ParseStatus(ev); err != nil || c.RequestID == "" || c.Chart != "tiny" || c.Revision != 1 {
				t.Errorf("uninstalled of db: %+v, %v", c, err)
			}
		}
	}
	if n != 1 {
		t.Errorf("uninstalled of db sent %d times", n)
	}
}

func waitGone(t *testing.T, s *stack, ns, name string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		_, err := s.client.Get(context.Background(), ns, name)
		if err != nil && strings.Contains(err.Error(), "(HTTP 404)") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s still there after %s: %v", ns, name, within, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func grep(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// The console's routes, async and synchronous, answer with the console's shapes (golden
// files of status, content type and JSON structure, e2e/testdata/console; -update rewrites them).
func TestConsoleLifecycleRoutesShapes(t *testing.T) {
	t.Parallel()
	ns := cluster.Namespace(t)
	s := newStackWith(t, unbounded, ns)
	tiny := s.charts.ChartURL("tiny", "0.1.0")
	body := func(v any) []byte { b, _ := json.Marshal(v); return b }

	steps := []struct {
		golden, method, path string
		query                url.Values
		body                 []byte
		status               int
	}{
		{"sync-install", http.MethodPost, api.PathRelease, nil,
			body(api.ReleaseRequest{Name: "web", Namespace: ns, ChartURL: tiny, Values: map[string]any{"message": "one"}}), http.StatusOK},
		{"sync-upgrade", http.MethodPut, api.PathRelease, nil,
			body(api.ReleaseRequest{Name: "web", Namespace: ns, ChartURL: tiny, Values: map[string]any{"message": "two"}}), http.StatusOK},
		{"sync-rollback", http.MethodPatch, api.PathRelease, nil, body(map[string]any{"name": "web", "namespace": ns, "version": 1}), http.StatusOK},
		{"async-rollback", http.MethodPatch, api.PathAsync, nil, body(map[string]any{"name": "web", "namespace": ns, "version": 2}), http.StatusCreated},
		{"async-rollback-missing-revision", http.MethodPatch, api.PathAsync, nil, body(map[string]any{"name": "web", "namespace": ns, "version": 99}), http.StatusNotFound},
		{"async-uninstall-missing", http.MethodDelete, api.PathAsync, url.Values{"ns": {ns}, "name": {"nope"}, "version": {"1"}}, nil, http.StatusNotFound},
	}
	for _, st := range steps {
		code, shape := s.shape(t, st.method, st.path, st.query, st.body)
		if code != st.status {
			t.Fatalf("%s %s: %d, want %d\n%s", st.method, st.path, code, st.status, shape)
		}
		golden(t, st.golden, fmt.Sprintf("%s %s -> %d\n%s", st.method, st.path, code, shape))
		if st.golden == "async-rollback" {
			waitStatus(t, s, ns, "web", "deployed", 60*time.Second)
		}
	}
	rel, err := s.client.Get(context.Background(), ns, "web")
	if err != nil || rel.Version != 4 || rel.Config["message"] != "two" {
		t.Errorf("after rollback to 2: %+v, %v", rel, err)
	}
	// A caller who may not delete the release's records is refused, and nothing is marked.
	req, _ := http.NewRequest(http.MethodDelete, s.submit.URL+api.PathAsync+"?"+url.Values{"ns": {ns}, "name": {"web"}}.Encode(), nil)
	req.Header.Set("Authorization", "Bearer "+cluster.Dev.BearerToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("uninstall by a user without rights: %d, want 403", resp.StatusCode)
	}
	if rel, err := s.client.Get(context.Background(), ns, "web"); err != nil || rel.Info.Status.String() != "deployed" {
		t.Errorf("after a refused uninstall: %v %v", rel, err)
	}
	// Async uninstall: 204, no body (the console's answer); then gone.
	code, shape := s.shape(t, http.MethodDelete, api.PathAsync, url.Values{"ns": {ns}, "name": {"web"}, "version": {"4"}}, nil)
	if code != http.StatusNoContent {
		t.Fatalf("async uninstall: %d %s", code, shape)
	}
	golden(t, "async-uninstall", fmt.Sprintf("DELETE %s -> %d\n%s", api.PathAsync, code, shape))
	waitGone(t, s, ns, "web", 60*time.Second)

	// Synchronous uninstall answers Helm's UninstallReleaseResponse once the release is gone.
	if code, shape := s.shape(t, http.MethodPost, api.PathRelease, nil, body(api.ReleaseRequest{Name: "db", Namespace: ns, ChartURL: tiny})); code != http.StatusOK {
		t.Fatalf("sync install db: %d %s", code, shape)
	}
	code, shape = s.shape(t, http.MethodDelete, api.PathRelease, url.Values{"ns": {ns}, "name": {"db"}}, nil)
	if code != http.StatusOK {
		t.Fatalf("sync uninstall: %d %s", code, shape)
	}
	golden(t, "sync-uninstall", fmt.Sprintf("DELETE %s -> %d\n%s", api.PathRelease, code, shape))
	if _, err := cluster.Client.AppsV1().Deployments(ns).Get(context.Background(), "db", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment db after the synchronous uninstall: %v", err)
	}
	// A failed synchronous install: 502 with Helm's reason, as the console.
	code, shape = s.shape(t, http.MethodPost, api.PathRelease, nil, body(api.ReleaseRequest{Name: "bad", Namespace: ns, ChartURL: s.charts.ChartURL("hookfail", "0.1.0")}))
	if code != http.StatusBadGateway || !strings.Contains(shape, "error: string") {
		t.Errorf("failed sync install: %d %s", code, shape)
	}
	golden(t, "sync-install-failed", fmt.Sprintf("POST %s -> %d\n%s", api.PathRelease, code, shape))
}

// A synchronous wait that ends first answers 504 and the work goes on; so does a client
// that hangs up.
func TestSyncRouteDeadline(t *testing.T) {
	t.Parallel()
	ns := cluster.SlowNamespace(t) // pods become ready only after 60 s
	s := newStackWith(t, map[string]string{"SYNC_TIMEOUT": "2s", "MAX_QUEUED": "0", "MAX_QUEUED_PER_NAMESPACE": "0"}, ns)
	tiny := s.charts.ChartURL("tiny", "0.1.0")
	b, _ := json.Marshal(api.ReleaseRequest{Name: "slow", Namespace: ns, ChartURL: tiny, Wait: true, Timeout: "10m"})
	start := time.Now()
	code, shape := s.shape(t, http.MethodPost, api.PathRelease, nil, b)
	if code != http.StatusGatewayTimeout || !strings.Contains(shape, "error: string") {
		t.Fatalf("sync install past SYNC_TIMEOUT: %d %s", code, shape)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("504 after %s, want about SYNC_TIMEOUT (2 s)", d)
	}
	golden(t, "sync-timeout", fmt.Sprintf("POST %s -> %d\n%s", api.PathRelease, code, shape))
	// Not undone: the install goes on.
	if rel, err := s.client.Get(context.Background(), ns, "slow"); err != nil || rel.Info.Status.String() != "pending-install" {
		t.Errorf("after the 504: %v %v", rel, err)
	}

	// A client that hangs up first: the same.
	b, _ = json.Marshal(api.ReleaseRequest{Name: "slow2", Namespace: ns, ChartURL: tiny, Wait: true, Timeout: "10m"})
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	hreq, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.submit.URL+api.PathRelease, bytes.NewReader(b))
	hreq.Header.Set("Authorization", "Bearer "+cluster.Operator.BearerToken)
	if resp, err := http.DefaultClient.Do(hreq); err == nil {
		resp.Body.Close()
		t.Fatalf("answered %d before the client's deadline", resp.StatusCode)
	}
	waitStatus(t, s, ns, "slow2", "pending-install", 10*time.Second)
}

func waitStatus(t *testing.T, s *stack, ns, name, status string, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		rel, err := s.client.Get(context.Background(), ns, name)
		if err == nil && rel.Info.Status.String() == status {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s not %s after %s: %+v %v", ns, name, status, within, rel, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// shape calls submit and describes the answer: content type and the JSON structure (keys
// and value types, two levels deep), so that golden files hold shapes, not values.
func (s *stack) shape(t *testing.T, method, path string, q url.Values, body []byte) (int, string) {
	t.Helper()
	u := s.submit.URL + path
	if len(q) > 0 {
		u += "?" + q.Encode()
	}
	req, err := http.NewRequest(method, u, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+cluster.Operator.BearerToken)
	c := &http.Client{Timeout: 2 * time.Minute}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if len(bytes.TrimSpace(raw)) == 0 {
		return resp.StatusCode, "(no body)\n"
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return resp.StatusCode, "not JSON: " + string(raw)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "content-type: %s\n", resp.Header.Get("Content-Type"))
	describe(&b, "", v, 0)
	return resp.StatusCode, b.String()
}

func describe(b *strings.Builder, indent string, v any, depth int) {
	m, ok := v.(map[string]any)
	if !ok {
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		switch x := m[k].(type) {
		case map[string]any:
			fmt.Fprintf(b, "%s%s: object\n", indent, k)
			if depth < 1 {
				describe(b, indent+"  ", x, depth+1)
			}
		case []any:
			fmt.Fprintf(b, "%s%s: array\n", indent, k)
		case string:
			fmt.Fprintf(b, "%s%s: string\n", indent, k)
		case float64:
			fmt.Fprintf(b, "%s%s: number\n", indent, k)
		case bool:
			fmt.Fprintf(b, "%s%s: bool\n", indent, k)
		default:
			fmt.Fprintf(b, "%s%s: null\n", indent, k)
		}
	}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "console", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from %s:\n--- got\n%s\n--- want\n%s", name, path, got, want)
	}
}
