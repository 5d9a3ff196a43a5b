package main

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	helmrelease "helm.sh/helm/v3/pkg/release"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/release/storage"
)

func TestInstallAnswers201WithTheReservedPendingRelease(t *testing.T) {
	s := newStack(t)
	ns := cluster.Namespace(t)

	var sec corev1.Secret
	code, hdr := s.call(t, http.MethodPost, api.PathAsync, s.install("web", ns), &sec)
	if code != http.StatusCreated {
		t.Fatalf("install: got %d, want 201", code)
	}
	if sec.Name != "sh.helm.release.v1.web.v1" || sec.Namespace != ns || sec.UID == "" {
		t.Errorf("answer names %s/%s uid %q", sec.Namespace, sec.Name, sec.UID)
	}
	wantLabels := map[string]string{"owner": "helm", "name": "web", "status": "pending-install", "version": "1"}
	for k, v := range wantLabels {
		if sec.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, sec.Labels[k], v)
		}
	}
	if sec.Type != release.SecretType || len(sec.Data) != 0 {
		t.Errorf("type %q, %d data keys: want %s and no payload", sec.Type, len(sec.Data), release.SecretType)
	}
	if loc := hdr.Get("Location"); loc != "/api/helm/release?name=web&ns="+ns {
		t.Errorf("Location = %q", loc)
	}

	// Right after 201, Helm's own storage driver reads the reservation.
	stored, err := storage.NewSecrets(cluster.Client.CoreV1().Secrets(ns)).Get(sec.Name)
	if err != nil {
		t.Fatalf("Helm cannot read the reservation: %v", err)
	}
	if stored.Info.Status != helmrelease.StatusPendingInstall || stored.Version != 1 || stored.Chart.Metadata.Name != "tiny" {
		t.Errorf("stored release: status %s, version %d, chart %s", stored.Info.Status, stored.Version, stored.Chart.Metadata.Name)
	}
	if stored.Config["message"] != "hi" {
		t.Errorf("stored values %v", stored.Config)
	}
	// The API shows it too, and the secret is the same object (same UID).
	var got helmrelease.Release
	if code, _ := s.call(t, http.MethodGet, "/api/helm/release?ns="+ns+"&name=web", nil, &got); code != http.StatusOK {
		t.Fatalf("get: %d", code)
	}
	if got.Info.Status != helmrelease.StatusPendingInstall || got.Version != 1 {
		t.Errorf("get: status %s version %d", got.Info.Status, got.Version)
	}
	live, err := cluster.Client.CoreV1().Secrets(ns).Get(context.Background(), sec.Name, metav1.GetOptions{})
	if err != nil || live.UID != sec.UID {
		t.Errorf("live secret uid %v, err %v; answered %s", live.UID, err, sec.UID)
	}

	// The executor was told, with the contract's type, subject and extensions.
	evs := s.sink.Events()
	if len(evs) != 1 {
		t.Fatalf("%d events sent, want 1", len(evs))
	}
	e := evs[0]
	a, err := events.ParseAccepted(e)
	if err != nil {
		t.Fatal(err)
	}
	if e.Type() != events.TypeInstallAccepted || e.Subject() != ns+"/web" || a.Revision != 1 || a.SecretName != sec.Name {
		t.Errorf("event %s subject %s revision %d secret %s", e.Type(), e.Subject(), a.Revision, a.SecretName)
	}
	if e.Extensions()[events.ExtRequestID] != sec.Labels[release.LabelRequestID] {
		t.Errorf("request id extension %v, label %v", e.Extensions()[events.ExtRequestID], sec.Labels[release.LabelRequestID])
	}
}

func TestListShowsEveryStatusAndLimitInfo(t *testing.T) {
	s := newStack(t)
	ns := cluster.Namespace(t)
	for _, name := range []string{"a", "b"} {
		if code, _ := s.call(t, http.MethodPost, api.PathAsync, s.install(name, ns), nil); code != http.StatusCreated {
			t.Fatalf("install %s: %d", name, code)
		}
	}
	var full []helmrelease.Release
	if code, _ := s.call(t, http.MethodGet, "/api/helm/releases?ns="+ns, nil, &full); code != http.StatusOK {
		t.Fatalf("list: %d", code)
	}
	if len(full) != 2 || full[0].Info.Status != helmrelease.StatusPendingInstall {
		t.Fatalf("list: %+v", full)
	}
	var limited []map[string]any
	s.call(t, http.MethodGet, "/api/helm/releases?ns="+ns+"&limitInfo=true", nil, &limited)
	if len(limited) != 2 {
		t.Fatalf("limitInfo list has %d releases", len(limited))
	}
	for k := range limited[0] {
		// queue: async-helm's optional addition on a queued row (docs/design.md, "Queue
		// visibility"); the console ignores it.
		if k != "name" && k != "namespace" && k != "version" && k != "info" && k != "chart" && k != "queue" {
			t.Errorf("limitInfo kept field %q", k)
		}
	}
	var all []map[string]any
	s.call(t, http.MethodGet, "/api/helm/releases?limitInfo=true", nil, &all)
	if found := inNamespace(all, ns); found != 2 {
		t.Errorf("all-namespaces list shows %d of this namespace's 2 releases", found)
	}
}

func TestConcurrentInstallsOfOneNameExactlyOneWins(t *testing.T) {
	s := newStack(t)
	ns := cluster.Namespace(t)
	const n = 20
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			codes[i], _ = s.call(t, http.MethodPost, api.PathAsync, s.install("race", ns), nil)
		}(i)
	}
	wg.Wait()
	count := map[int]int{}
	for _, c := range codes {
		count[c]++
	}
	if count[http.StatusCreated] != 1 || count[http.StatusConflict] != n-1 {
		t.Fatalf("answers %v: want exactly one 201 and %d 409", count, n-1)
	}
	if got := len(s.sink.Events()); got != 1 {
		t.Errorf("%d events emitted, want 1", got)
	}
}

func TestUpgradeReservesNextRevisionAndRefusesWhilePending(t *testing.T) {
	s := newStack(t)
	ns := cluster.Namespace(t)
	if code, _ := s.call(t, http.MethodPost, api.PathAsync, s.install("app", ns), nil); code != http.StatusCreated {
		t.Fatal(code)
	}
	var e api.Error
	code, _ := s.call(t, http.MethodPut, api.PathAsync, api.ReleaseRequest{Name: "app", Namespace: ns}, &e)
	if code != http.StatusConflict || !strings.Contains(e.Error, "revision 1 is pending-install") {
		t.Fatalf("upgrade while pending: %d %q", code, e.Error)
	}
	// The executor's part, done by hand: revision 1 deployed.
	if _, err := markDeployed(&release.Store{Client: cluster.Client}, ns, "app", 1); err != nil {
		t.Fatal(err)
	}
	// No chart named: the release's chart is reused.
	var sec corev1.Secret
	code, _ = s.call(t, http.MethodPut, api.PathAsync, api.ReleaseRequest{Name: "app", Namespace: ns,
		Values: map[string]any{"message": "v2"}}, &sec)
	if code != http.StatusCreated || sec.Name != "sh.helm.release.v1.app.v2" || sec.Labels["status"] != "pending-upgrade" {
		t.Fatalf("upgrade: %d %s %v", code, sec.Name, sec.Labels)
	}
	a, err := events.ParseAccepted(s.sink.Events()[1])
	if err != nil || a.Action != release.ActionUpgrade || !a.ReuseChart || a.Revision != 2 {
		t.Errorf("upgrade event %+v, %v", a, err)
	}
	var hist []helmrelease.Release
	s.call(t, http.MethodGet, "/api/helm/release/history?ns="+ns+"&name=app", nil, &hist)
	if len(hist) != 2 {
		t.Errorf("history has %d revisions", len(hist))
	}
}

func TestConcurrentUpgradesExactlyOneWins(t *testing.T) {
	s := newStack(t)
	ns := cluster.Namespace(t)
	store := &release.Store{Client: cluster.Client}
	if code, _ := s.call(t, http.MethodPost, api.PathAsync, s.install("up", ns), nil); code != http.StatusCreated {
		t.Fatal(code)
	}
	if _, err := markDeployed(store, ns, "up", 1); err != nil {
		t.Fatal(err)
	}
	const n = 20
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			codes[i], _ = s.call(t, http.MethodPut, api.PathAsync, api.ReleaseRequest{Name: "up", Namespace: ns}, nil)
		}(i)
	}
	wg.Wait()
	won := 0
	for _, c := range codes {
		if c == http.StatusCreated {
			won++
		} else if c != http.StatusConflict {
			t.Errorf("unexpected answer %d", c)
		}
	}
	if won != 1 {
		t.Fatalf("%d upgrades got 201, want 1 (%v)", won, codes)
	}
}

func markDeployed(store *release.Store, ns, name string, rev int) (*helmrelease.Release, error) {
	rel, err := store.Get(context.Background(), ns, name, rev)
	if err != nil {
		return nil, err
	}
	rel.Info.Status = helmrelease.StatusDeployed
	return rel, storage.NewSecrets(store.Client.CoreV1().Secrets(ns)).Update(release.SecretName(name, rev), rel)
}

func TestErrorsHaveTheRightStatus(t *testing.T) {
	s := newStack(t)
	ns := cluster.Namespace(t)
	if code, _ := s.call(t, http.MethodPost, api.PathAsync, s.install("taken", ns), nil); code != http.StatusCreated {
		t.Fatal(code)
	}
	tiny := s.charts.ChartURL("tiny", "0.1.0")
	big := strings.Repeat("x", api.MaxBodyBytes)
	cases := []struct {
		name   string
		method string
		path   string
		body   any
		want   int
		says   string
	}{
		{"malformed JSON", http.MethodPost, api.PathAsync, []byte(`{"name":`), 400, "not a JSON"},
		{"invalid release name", http.MethodPost, api.PathAsync, api.ReleaseRequest{Name: "Bad_Name", Namespace: ns, ChartURL: tiny}, 400, "release name"},
		{"no chart", http.MethodPost, api.PathAsync, api.ReleaseRequest{Name: "x", Namespace: ns}, 400, "chart_url"},
		{"bad scheme", http.MethodPost, api.PathAsync, api.ReleaseRequest{Name: "x", Namespace: ns, ChartURL: "file:///etc/passwd"}, 400, "scheme"},
		{"bad timeout", http.MethodPost, api.PathAsync, api.ReleaseRequest{Name: "x", Namespace: ns, ChartURL: tiny, Timeout: "soon"}, 400, "timeout"},
		{"unknown namespace", http.MethodPost, api.PathAsync, api.ReleaseRequest{Name: "x", Namespace: "no-such-ns", ChartURL: tiny}, 404, "namespace"},
		{"upgrade of nothing", http.MethodPut, api.PathAsync, api.ReleaseRequest{Name: "ghost", Namespace: ns, ChartURL: tiny}, 404, "no revisions"},
		{"name in use", http.MethodPost, api.PathAsync, s.install("taken", ns), 409, "in use"},
		{"chart not found", http.MethodPost, api.PathAsync, api.ReleaseRequest{Name: "x", Namespace: ns, ChartURL: s.URL() + "/nope-1.0.0.tgz"}, 422, "404"},
		{"chart not loadable", http.MethodPost, api.PathAsync, api.ReleaseRequest{Name: "x", Namespace: ns, ChartURL: s.URL() + "/index.yaml"}, 422, "cannot be loaded"},
		{"wrong version", http.MethodPost, api.PathAsync, api.ReleaseRequest{Name: "x", Namespace: ns, ChartURL: tiny, ChartVersion: "9.9.9"}, 422, "not 9.9.9"},
		{"unknown index entry repo", http.MethodPost, api.PathAsync, api.ReleaseRequest{Name: "x", Namespace: ns, IndexEntry: "tiny--nowhere"}, 422, "nowhere"},
		{"values fail schema", http.MethodPost, api.PathAsync, api.ReleaseRequest{Name: "x", Namespace: ns, ChartURL: tiny, Values: map[string]any{"replicas": "many"}}, 422, "replicas"},
		{"too large", http.MethodPost, api.PathAsync, api.ReleaseRequest{Name: "x", Namespace: ns, ChartURL: tiny, Values: map[string]any{"blob": big}}, 413, "too large"},
		{"get of nothing", http.MethodGet, "/api/helm/release?ns=" + ns + "&name=ghost", nil, 404, "not found"},
		{"get without name", http.MethodGet, "/api/helm/release?ns=" + ns, nil, 400, "required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var e api.Error
			code, _ := s.call(t, c.method, c.path, c.body, &e)
			if code != c.want || !strings.Contains(e.Error, c.says) {
				t.Errorf("got %d %q, want %d containing %q", code, e.Error, c.want, c.says)
			}
		})
	}
	// None of the refused requests reserved anything.
	secs, err := cluster.Client.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: release.SelectorReleaseSecrets})
	if err != nil || len(secs.Items) != 1 {
		t.Errorf("%d release secrets after refusals (err %v), want 1", len(secs.Items), err)
	}
}

func (s *stack) URL() string { return s.charts.URL }

func TestSinkDownAnswers503AndLeavesNothingPending(t *testing.T) {
	s := newStack(t)
	ns := cluster.Namespace(t)
	s.sink.Refuse(http.StatusInternalServerError)
	var e api.Error
	code, _ := s.call(t, http.MethodPost, api.PathAsync, s.install("orphan", ns), &e)
	if code != http.StatusServiceUnavailable {
		t.Fatalf("got %d %q, want 503", code, e.Error)
	}
	secs, err := cluster.Client.CoreV1().Secrets(ns).List(context.Background(), metav1.ListOptions{LabelSelector: release.SelectorReleaseSecrets})
	if err != nil || len(secs.Items) != 0 {
		t.Fatalf("%d release secrets left behind (err %v)", len(secs.Items), err)
	}
	// When the sink is back the same install goes through.
	s.sink.Refuse(0)
	if code, _ := s.call(t, http.MethodPost, api.PathAsync, s.install("orphan", ns), nil); code != http.StatusCreated {
		t.Fatalf("retry: %d", code)
	}
}

func TestIndexEntryAndChartCache(t *testing.T) {
	s := newStack(t)
	ns := cluster.Namespace(t)
	for i := 0; i < 3; i++ {
		req := api.ReleaseRequest{Name: fmt.Sprintf("idx%d", i), Namespace: ns, IndexEntry: "tiny--test", ChartVersion: "0.1.0"}
		var sec corev1.Secret
		if code, _ := s.call(t, http.MethodPost, api.PathAsync, req, &sec); code != http.StatusCreated {
			t.Fatalf("install %d: %d", i, code)
		}
	}
	if d := s.charts.Downloads.Load(); d != 1 {
		t.Errorf("chart downloaded %d times for 3 installs, want 1", d)
	}
}

func TestRequestsAsCloudEvents(t *testing.T) {
	s := newStack(t)
	ns := cluster.Namespace(t)
	c, err := cloudevents.NewClientHTTP()
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"binary", "structured"} {
		t.Run(mode, func(t *testing.T) {
			e := cloudevents.NewEvent()
			e.SetID("pipeline-" + mode)
			e.SetSource("/pipelines/test")
			e.SetType(events.TypeInstallRequested)
			if err := e.SetData(cloudevents.ApplicationJSON, s.install("ce-"+mode, ns)); err != nil {
				t.Fatal(err)
			}
			ctx := cehttp.WithCustomHeader(cloudevents.ContextWithTarget(context.Background(), s.url+api.PathEvents),
				http.Header{"Authorization": {"Bearer " + s.token}})
			if mode == "structured" {
				ctx = cloudevents.WithEncodingStructured(ctx)
			}
			reply, res := c.Request(ctx, e)
			var httpRes *cehttp.Result
			if !cloudevents.ResultAs(res, &httpRes) || httpRes.StatusCode != http.StatusCreated {
				t.Fatalf("result %v, want 201", res)
			}
			var sec corev1.Secret
			if reply == nil || reply.Type() != events.TypeReserved || reply.DataAs(&sec) != nil || sec.Name != "sh.helm.release.v1.ce-"+mode+".v1" {
				t.Fatalf("reply %v", reply)
			}
		})
	}
	// The same mistakes get the same codes as over HTTP.
	e := cloudevents.NewEvent()
	e.SetID("dup")
	e.SetSource("/pipelines/test")
	e.SetType(events.TypeInstallRequested)
	_ = e.SetData(cloudevents.ApplicationJSON, s.install("ce-binary", ns))
	_, res := c.Request(cehttp.WithCustomHeader(cloudevents.ContextWithTarget(context.Background(), s.url+api.PathEvents),
		http.Header{"Authorization": {"Bearer " + s.token}}), e)
	var httpRes *cehttp.Result
	if !cloudevents.ResultAs(res, &httpRes) || httpRes.StatusCode != http.StatusConflict {
		t.Errorf("duplicate install event: %v, want 409", res)
	}
}
