package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/async-helm/async-helm/internal/testcharts/hostile"
	"github.com/async-helm/async-helm/pkg/actionlog"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/submitclient"
)

// A hostile tenant (dev, editor of namespaces of its own and of one it shares with the
// operator) tries the attacks of issue 44 at once, while the operator's 200 installs run
// from 16 clients in another namespace: a metadata flood on release Secrets, a chart whose
// waits alternate between two log lines, a recursive values schema on install and on
// template, and the rewrite of the record a remediation would roll back to. Submit, the
// executor and the notifier run with config/knative's GOMEMLIMIT and must stay under its
// memory limits, none may exit, all 200 installs end deployed, and each attack gets the
// answer docs/security.md gives it.
func TestHostileTenantStaysWithinLimits(t *testing.T) {
	t.Parallel()
	victim, flood, devNS, shared := cluster.Namespace(t), cluster.Namespace(t), cluster.Namespace(t), cluster.Namespace(t)
	for _, ns := range []string{flood, devNS, shared} {
		grantDev(t, ns, "edit")
	}
	limits := knativeMemory(t)
	env := func(fn string, extra map[string]string) map[string]string {
		out := map[string]string{"GOMEMLIMIT": limits[fn].gomemlimit}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	s := newStackEnv(t, stackEnv{Submit: env("submit", unbounded), Executor: env("executor", nil),
		// The sweeper re-drives a lost delivery after seconds, not minutes: the 200 installs and
		// the flood load one API server, on which a renewal or a delivery may time out.
		Notifier: env("notifier", map[string]string{"SWEEP_INTERVAL": "2s", "REDRIVE_AFTER": "5s"})}, victim, flood, devNS, shared)
	procs := map[string]watched{"submit": {p: s.submit, pid: s.submit.Pid()},
		"executor": {p: s.executor, pid: s.executor.Pid()}, "notifier": {p: s.notifier, pid: s.notifier.Pid()}}
	children := watchChildren(s.submit.Pid(), s.executor.Pid())
	dev := asDev(s)
	devClient := devKube(t)
	deep, altWait := recursiveChart(t), altWaitChartURL(t)
	t.Cleanup(func() { deleteFlood(flood) })

	started := time.Now()
	burst := startInstalls(t, s, victim, 200, 16)
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	results := runAttacks(ctx, []attack{
		{"metadata flood", func(ctx context.Context) (string, error) { return metadataFlood(ctx, s, devClient, flood) }},
		{"alternating-wait log", func(ctx context.Context) (string, error) { return alternatingWaits(ctx, s, dev, devNS, altWait) }},
		{"recursive schema, install", func(ctx context.Context) (string, error) { return recursiveSchemaInstall(ctx, s, dev, devNS, deep) }},
		{"recursive schema, template", func(ctx context.Context) (string, error) { return recursiveSchemaTemplate(ctx, s, devNS, deep) }},
		{"rewritten rollback target", func(ctx context.Context) (string, error) {
			return rewrittenRollbackTarget(ctx, s, devClient, shared, victim)
		}},
	})
	for _, r := range results {
		if r.err != nil {
			t.Errorf("%s (after %s): %v", r.name, r.took.Round(time.Millisecond), r.err)
		} else {
			t.Logf("%s (after %s): %s", r.name, r.took.Round(time.Millisecond), r.answer)
		}
	}
	burst.wait(t, 6*time.Minute)
	t.Logf("attacks and the 200 installs done after %s", time.Since(started).Round(time.Second))

	for _, name := range []string{"submit", "executor", "notifier"} {
		w := procs[name]
		if w.p.Exited() || w.p.Pid() != w.pid {
			t.Errorf("%s exited during the attacks (pid %d, now %d)", name, w.pid, w.p.Pid())
		}
		checkPeakRSS(t, name, w.pid, limits[name].limit)
	}
	for parent, kib := range children.stop() {
		t.Logf("peak RSS of %s's bounded children (schema checks, renders): %d MiB", parent, kib>>10)
	}
}

type watched struct {
	p interface {
		Exited() bool
		Pid() int
	}
	pid int
}

// knativeLimit is one function's memory limit and GOMEMLIMIT in config/knative.
type knativeLimit struct {
	limit      int64
	gomemlimit string
}

// knativeMemory reads each function's container memory limit and GOMEMLIMIT from its
// Knative Service in config/knative.
func knativeMemory(t *testing.T) map[string]knativeLimit {
	t.Helper()
	out := map[string]knativeLimit{}
	for _, fn := range []string{"submit", "executor", "notifier"} {
		files, err := filepath.Glob(filepath.Join(root, "config", "knative", "5*-"+fn+".yaml"))
		if err != nil || len(files) != 1 {
			t.Fatalf("config/knative has no single manifest of %s (%v)", fn, err)
		}
		raw, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, doc := range strings.Split(string(raw), "\n---") {
			var u unstructured.Unstructured
			if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil || u.GetKind() != "Service" {
				continue
			}
			containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "template", "spec", "containers")
			if len(containers) != 1 {
				t.Fatalf("%s: %d containers", files[0], len(containers))
			}
			c := containers[0].(map[string]any)
			mem, _, _ := unstructured.NestedString(c, "resources", "limits", "memory")
			q, err := resource.ParseQuantity(mem)
			if err != nil {
				t.Fatalf("%s: memory limit %q: %v", files[0], mem, err)
			}
			l := knativeLimit{limit: q.Value()}
			envs, _, _ := unstructured.NestedSlice(c, "env")
			for _, e := range envs {
				if e := e.(map[string]any); e["name"] == "GOMEMLIMIT" {
					l.gomemlimit, _ = e["value"].(string)
				}
			}
			if l.gomemlimit == "" {
				t.Fatalf("%s: no GOMEMLIMIT", files[0])
			}
			out[fn] = l
		}
		if out[fn].limit == 0 {
			t.Fatalf("%s: no Knative Service with a memory limit", files[0])
		}
	}
	return out
}

// attack is one attack of the tenant: its answer when it got the one it should, else an error.
type attack struct {
	name string
	run  func(ctx context.Context) (string, error)
}

type attackResult struct {
	name, answer string
	err          error
	took         time.Duration
}

// runAttacks runs the attacks at once and returns their results in order.
func runAttacks(ctx context.Context, attacks []attack) []attackResult {
	out := make([]attackResult, len(attacks))
	var wg sync.WaitGroup
	for i, a := range attacks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			answer, err := a.run(ctx)
			out[i] = attackResult{name: a.name, answer: answer, err: err, took: time.Since(start)}
		}()
	}
	wg.Wait()
	return out
}

// childWatch samples the peak RSS of the processes the functions start (the bounded schema
// checks and renders): in a container they count against the function's memory limit.
type childWatch struct {
	stopped chan struct{}
	done    chan struct{}
	peak    map[string]int64 // parent name -> the largest child's VmHWM, KiB
}

func watchChildren(submit, executor int) *childWatch {
	w := &childWatch{stopped: make(chan struct{}), done: make(chan struct{}), peak: map[string]int64{}}
	parents := map[int]string{submit: "submit", executor: "executor"}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stopped:
				return
			case <-time.After(100 * time.Millisecond):
			}
			for pid, name := range parents {
				for _, child := range childrenOf(pid) {
					w.peak[name] = max(w.peak[name], peakRSS(child))
				}
			}
		}
	}()
	return w
}

func (w *childWatch) stop() map[string]int64 {
	close(w.stopped)
	<-w.done
	return w.peak
}

// childrenOf lists a process's children (Linux: /proc/<pid>/task/<tid>/children).
func childrenOf(pid int) []int {
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/children", pid))
	var out []int
	for _, f := range tasks {
		b, _ := os.ReadFile(f)
		for _, field := range strings.Fields(string(b)) {
			var child int
			if _, err := fmt.Sscan(field, &child); err == nil {
				out = append(out, child)
			}
		}
	}
	return out
}

// call calls submit with a token and returns the status and body, within ctx.
func call(ctx context.Context, s *stack, token, method, path string, body []byte) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, method, s.submit.URL+path, bytes.NewReader(body))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, strings.TrimSpace(string(out)), nil
}

// finalRelease waits until a release's latest revision is not pending, within ctx.
func finalRelease(ctx context.Context, s *stack, ns, name string) (*api.Release, error) {
	for {
		rel, err := s.client.Get(ctx, ns, name)
		if err == nil && rel.Info != nil && !release.IsPending(rel.Info.Status.String()) {
			return rel, nil
		}
		select {
		case <-ctx.Done():
			if err == nil && rel.Info != nil {
				return nil, fmt.Errorf("%s/%s not final: %w (revision %d %s: %s)", ns, name, ctx.Err(), rel.Version, rel.Info.Status, rel.Info.Description)
			}
			return nil, fmt.Errorf("%s/%s not final: %w (last read: %v)", ns, name, ctx.Err(), err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// The metadata flood (issue 44, finding 1): Secrets labelled owner=helm, each with 60
// async-helm.io/ annotations of 4 KiB (as the issue tried it) and 200 async-helm.io/ labels
// of 63 bytes; 200 of them (the 800 took minutes to write on CI's shared API
// server), then dev lists the namespace through submit, four lists at once, two of them
// the console's (limitInfo). The release indexes and the lists keep only the keys
// async-helm reads of each, and the lists read the namespace in pages; they answer 200
// without the flood (nothing decodes).
const (
	floodSecrets     = 200
	floodAnnotations = 60
	floodLabels      = 200
)

func metadataFlood(ctx context.Context, s *stack, c kubernetes.Interface, ns string) (string, error) {
	start := time.Now()
	value := strings.Repeat("x", 4<<10)
	label := strings.Repeat("y", 63)
	err := parallel(ctx, floodSecrets, 16, func(i int) error {
		name := fmt.Sprintf("flood-%04d", i)
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: release.SecretName(name, 1),
			Labels: map[string]string{release.LabelOwner: release.OwnerHelm, release.LabelName: name,
				release.LabelStatus: "deployed", release.LabelVersion: "1", "async-helm.io/flood": "true"},
			Annotations: map[string]string{}}, Type: release.SecretType}
		for a := 0; a < floodAnnotations; a++ {
			sec.Annotations[fmt.Sprintf("async-helm.io/a%02d", a)] = value
		}
		for l := 0; l < floodLabels; l++ {
			sec.Labels[fmt.Sprintf("async-helm.io/l%03d", l)] = label
		}
		_, err := c.CoreV1().Secrets(ns).Create(ctx, sec, metav1.CreateOptions{})
		return err
	})
	if err != nil {
		return "", fmt.Errorf("create the flood: %w", err)
	}
	made := time.Since(start)
	var answers []string
	var mu sync.Mutex
	err = parallel(ctx, 4, 4, func(i int) error {
		q := "?ns=" + ns
		if i%2 == 0 {
			q += "&limitInfo=true"
		}
		code, body, err := call(ctx, s, cluster.Dev.BearerToken, http.MethodGet, api.PathList+q, nil)
		if err != nil {
			return fmt.Errorf("list %s: %w", q, err)
		}
		if code != http.StatusOK || strings.Contains(body, "flood-") {
			return fmt.Errorf("list %s: %d %.300s, want 200 without the flood", q, code, body)
		}
		mu.Lock()
		answers = append(answers, fmt.Sprintf("%d %s", code, body))
		mu.Unlock()
		return nil
	})
	if err != nil {
		return "", err
	}
	sort.Strings(answers)
	return fmt.Sprintf("%d Secrets of %d KiB of metadata made in %s; dev's 4 lists answered %v", floodSecrets,
		(floodAnnotations*(4<<10)+floodLabels*80)>>10, made.Round(time.Millisecond), answers), nil
}

// deleteFlood deletes the flood at once (its namespace goes too, later): every submit on
// the cluster watches it.
func deleteFlood(ns string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_ = cluster.Client.CoreV1().Secrets(ns).DeleteCollection(ctx, metav1.DeleteOptions{},
		metav1.ListOptions{LabelSelector: "async-helm.io/flood=true"})
}

// parallel runs do(0..n-1) on workers goroutines; the first error ends it.
func parallel(ctx context.Context, n, workers int, do func(i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	next := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				if err := do(i); err != nil {
					cancel(err)
				}
			}
		}()
	}
	for i := 0; i < n && ctx.Err() == nil; i++ {
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	return context.Cause(ctx)
}

// altWaitChart is a StatefulSet with updateStrategy OnDelete (Helm logs "skipped ready
// check" for it on every poll) before one whose pod never becomes ready (kwok's simulate:
// stuck): Helm's wait logs two lines in turn every 2 s.
const altWaitChart = `{{- range $i, $s := list "a" "b" }}
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: {{ $.Release.Name }}-{{ $s }}
spec:
  serviceName: {{ $.Release.Name }}-{{ $s }}
  replicas: 1
  {{- if eq $s "a" }}
  updateStrategy: {type: OnDelete}
  {{- end }}
  selector:
    matchLabels: {app: {{ $.Release.Name }}-{{ $s }}}
  template:
    metadata:
      labels: {app: {{ $.Release.Name }}-{{ $s }}}
      {{- if eq $s "b" }}
      annotations: {async-helm.io/simulate: stuck}
      {{- end }}
    spec:
      containers:
      - name: app
        image: nginx:1.27
{{- end }}
`

// The alternating-wait log (issue 44, finding 2): dev installs altWaitChart with --wait for
// 60 s. Once both lines are in the log, the alternation is folded: its ConfigMap in
// async-helm's namespace is written at the heartbeats (every 30 s) and at the end, not at
// every 3 s flush. The install fails with Helm's timeout.
func alternatingWaits(ctx context.Context, s *stack, dev *submitclient.Client, ns, chartURL string) (string, error) {
	const name = "alt"
	w, err := cluster.Client.CoreV1().ConfigMaps("async-helm").Watch(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", actionlog.ObjectName(ns, name, 1)).String()})
	if err != nil {
		return "", err
	}
	defer w.Stop()
	if _, err := dev.Install(ctx, api.ReleaseRequest{Name: name, Namespace: ns, ChartURL: chartURL,
		Wait: true, Timeout: "60s"}); err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	writes, err := logWrites(ctx, w, ns+"/"+name+"-b")
	if err != nil {
		return "", err
	}
	rel, err := finalRelease(ctx, s, ns, name)
	if err != nil {
		return "", err
	}
	if st := rel.Info.Status.String(); st != "failed" || !strings.Contains(rel.Info.Description, "timed out") {
		return "", fmt.Errorf("the install ended %s (%s), want failed: timed out", st, rel.Info.Description)
	}
	return fmt.Sprintf("%s; %s: %s", writes, rel.Info.Status, rel.Info.Description), nil
}

// logWrites follows an action log's ConfigMap until its last write: from the first write
// holding both alternating lines (the OnDelete StatefulSet's "skipped ready check" and
// stuck's "not ready") it counts the writes, which must stay within one per heartbeat and
// the last (the alternation was written at every 3 s flush before).
func logWrites(ctx context.Context, w watch.Interface, stuck string) (string, error) {
	var alternating time.Time
	writes, total, bytesWritten := 0, 0, 0
	for {
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("the log's last write never came: %w (%d writes)", ctx.Err(), total)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return "", fmt.Errorf("the watch of the log ended (%d writes)", total)
			}
			cm, isCM := ev.Object.(*corev1.ConfigMap)
			if !isCM || (ev.Type != watch.Added && ev.Type != watch.Modified) {
				continue
			}
			total++
			data := strings.Join(mapValues(cm.Data), "")
			if !alternating.IsZero() {
				writes++
				bytesWritten += len(data)
			} else if strings.Contains(data, "StatefulSet skipped ready check") && strings.Contains(data, "StatefulSet is not ready: "+stuck) {
				alternating = time.Now()
			}
			if cm.Annotations["async-helm.io/log-state"] == "ended" {
				return judgeWrites(alternating, writes, total, bytesWritten)
			}
		}
	}
}

func judgeWrites(alternating time.Time, writes, total, written int) (string, error) {
	if alternating.IsZero() {
		return "", fmt.Errorf("the log never held both alternating lines (%d writes)", total)
	}
	took := time.Since(alternating)
	allowed := int(took/actionlog.HeartbeatEvery) + 2
	got := fmt.Sprintf("the log was written %d times (%d KiB) in the %s the waits alternated (%d writes in all)",
		writes, written>>10, took.Round(time.Second), total)
	if writes > allowed {
		return "", fmt.Errorf("%s, want at most %d: one per heartbeat and the last", got, allowed)
	}
	return got, nil
}

// linesOf is the lines of a process's output that name namespace ns and hold want (at most
// the last 30).
func linesOf(output, ns, want string) string {
	var out []string
	for _, l := range strings.Split(output, "\n") {
		if strings.Contains(l, ns) && strings.Contains(l, want) {
			out = append(out, l)
		}
	}
	return strings.Join(out[max(0, len(out)-30):], "\n")
}

func mapValues(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// recursiveSchema's two branches both follow a key down: values nested d deep that fail at
// the bottom cost 2^d checks (193 bytes; 15.6 s and 1.1 GB at 18 deep, in process).
const recursiveSchema = `{"$defs":{"n":{"anyOf":[{"type":"object","properties":{"a":{"$ref":"#/$defs/n"}}},` +
	`{"type":"object","additionalProperties":{"$ref":"#/$defs/n"}}]}},"$ref":"#/$defs/n"}`

// recursiveChart is chart "deep" 0.1.0 with recursiveSchema, served until the test ends.
func recursiveChart(t *testing.T) string {
	t.Helper()
	return serveArchive(t, "deep-0.1.0.tgz", hostile.Archive(t, hostile.ChartYAML("deep"), hostile.Entry{Name: "deep/values.schema.json", Data: []byte(recursiveSchema)},
		hostile.Entry{Name: "deep/templates/cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n")})).URL +
		"/deep-0.1.0.tgz"
}

// altWaitChartURL is altWaitChart as chart "altwait" 0.1.0, served until the test ends.
func altWaitChartURL(t *testing.T) string {
	t.Helper()
	return serveArchive(t, "altwait-0.1.0.tgz", hostile.Archive(t, hostile.ChartYAML("altwait"),
		hostile.Entry{Name: "altwait/templates/sts.yaml", Data: []byte(altWaitChart)})).URL + "/altwait-0.1.0.tgz"
}

// nestedValues is {"a": {"a": ... "x"}}, depth deep (the issue tried 20).
func nestedValues(depth int) map[string]any {
	var v any = "x"
	for range depth {
		v = map[string]any{"a": v}
	}
	return v.(map[string]any)
}

// The recursive schema on install (issue 44, finding 7): 422 "the values could not be
// checked against the chart's schema", from a child killed at 10 s or 256 MiB; nothing
// reserved.
func recursiveSchemaInstall(ctx context.Context, s *stack, dev *submitclient.Client, ns, chartURL string) (string, error) {
	_, err := dev.Install(ctx, api.ReleaseRequest{Name: "deep", Namespace: ns, ChartURL: chartURL, Values: nestedValues(20)})
	var apiErr *submitclient.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusUnprocessableEntity ||
		!strings.Contains(apiErr.Message, "could not be checked against the chart's schema") {
		return "", fmt.Errorf("install: %v, want 422: the values could not be checked against the chart's schema", err)
	}
	if _, err := s.client.Get(ctx, ns, "deep"); err == nil || !strings.Contains(err.Error(), "404") {
		return "", fmt.Errorf("after the 422 the release reads %v, want 404", err)
	}
	return fmt.Sprintf("%d %s", apiErr.Status, apiErr.Message), nil
}

// The recursive schema on /api/helm/template: the render runs in a child killed at its
// deadline or memory bound, 422.
func recursiveSchemaTemplate(ctx context.Context, s *stack, ns, chartURL string) (string, error) {
	body, _ := json.Marshal(api.ReleaseRequest{Name: "deep", Namespace: ns, ChartURL: chartURL, Values: nestedValues(20)})
	code, out, err := call(ctx, s, cluster.Dev.BearerToken, http.MethodPost, api.PathTemplate, body)
	if err != nil {
		return "", fmt.Errorf("template: %w", err)
	}
	if code != http.StatusUnprocessableEntity || !(strings.Contains(out, "did not render in time") || strings.Contains(out, "memory")) {
		return "", fmt.Errorf("template: %d %.300s, want 422: not rendered in time or over its memory", code, out)
	}
	return fmt.Sprintf("%d %s", code, out), nil
}

// The rewritten rollback target (issue 44, finding 3): the operator, who may bind roles
// anywhere, upgrades its release in a namespace dev edits, with remediation rollback; once
// the upgrade waits (on a pod that never becomes ready), dev rewrites revision 1, the
// record the remediation would restore, into a RoleBinding making dev admin of the
// operator's namespace. The remediation refuses the rewritten record ("no rollback: …
// revision 1 was rewritten"): no revision 3, no RoleBinding.
func rewrittenRollbackTarget(ctx context.Context, s *stack, dev kubernetes.Interface, ns, target string) (string, error) {
	tiny := s.charts.ChartURL("tiny", "0.1.0")
	if _, err := s.client.Install(ctx, api.ReleaseRequest{Name: "web", Namespace: ns, ChartURL: tiny}); err != nil {
		return "", fmt.Errorf("install: %w", err)
	}
	if rel, err := finalRelease(ctx, s, ns, "web"); err != nil || rel.Info.Status.String() != "deployed" {
		return "", fmt.Errorf("install of web: %v %v", rel, err)
	}
	if _, err := s.client.Upgrade(ctx, api.ReleaseRequest{Name: "web", Namespace: ns, ChartURL: tiny, Wait: true, Timeout: "30s",
		Remediation: api.RemediationRollback, Values: map[string]any{"podAnnotations": map[string]any{"async-helm.io/simulate": "stuck"}}}); err != nil {
		return "", fmt.Errorf("upgrade: %w", err)
	}
	if err := untilUpgradeApplied(ctx, s, ns, "web"); err != nil {
		return "", err
	}
	escalation := "apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata:\n  name: mallory\n  namespace: " + target +
		"\nroleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: admin}\n" +
		"subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: dev}]\n"
	if err := rewriteManifest(ctx, dev.CoreV1().Secrets(ns), release.SecretName("web", 1), escalation); err != nil {
		return "", err
	}
	rel, err := settledAttempt(ctx, s, ns, "web")
	if err != nil {
		return "", fmt.Errorf("upgrade of web after the rewrite: %w\nthe executor's lines of web:\n%s", err, linesOf(s.executor.Output(), ns, `"release":"web"`))
	}
	if rel.Version != 2 || rel.Info.Status.String() != "failed" || !strings.Contains(rel.Info.Description, "no rollback") ||
		!strings.Contains(rel.Info.Description, "revision 1 was rewritten") {
		return "", fmt.Errorf("web ended at revision %d %s (%s), want 2 failed: no rollback: revision 1 was rewritten",
			rel.Version, rel.Info.Status, rel.Info.Description)
	}
	if _, err := cluster.Client.CoreV1().Secrets(ns).Get(ctx, release.SecretName("web", 3), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("a revision 3 of web exists (%v): the rollback ran", err)
	}
	if _, err := cluster.Client.RbacV1().RoleBindings(target).Get(ctx, "mallory", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		return "", fmt.Errorf("the rewritten record's RoleBinding exists in %s (%v)", target, err)
	}
	return fmt.Sprintf("revision %d %s: %s", rel.Version, rel.Info.Status, rel.Info.Description), nil
}

// settledAttempt waits until the release's latest revision is final and its attempt noted
// ("(attempt 1 of 1; …)"): Helm fails the revision first, the executor then decides the
// remediation and writes it on the failed attempt.
func settledAttempt(ctx context.Context, s *stack, ns, name string) (*api.Release, error) {
	for {
		rel, err := finalRelease(ctx, s, ns, name)
		if err != nil || strings.Contains(rel.Info.Description, "(attempt ") || rel.Info.Status.String() != "failed" {
			return rel, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%s/%s revision %d failed, its attempt never noted: %w (%s)", ns, name, rel.Version, ctx.Err(), rel.Info.Description)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// untilUpgradeApplied waits until the Deployment carries the upgrade's stuck pods: Helm
// applied revision 2 and waits on it.
func untilUpgradeApplied(ctx context.Context, s *stack, ns, name string) error {
	for {
		d, err := cluster.Client.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err == nil && d.Spec.Template.Annotations["async-helm.io/simulate"] == "stuck" {
			return nil
		}
		if rel, err := s.client.Get(ctx, ns, name); err == nil && rel.Version == 2 && !release.IsPending(rel.Info.Status.String()) {
			return fmt.Errorf("the upgrade ended %s before its Deployment was seen applied: %s", rel.Info.Status, rel.Info.Description)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the upgrade never applied its Deployment: %w (%v)", ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// rewriteManifest is a namespace editor replacing a record's manifest in place.
func rewriteManifest(ctx context.Context, secrets interface {
	Get(context.Context, string, metav1.GetOptions) (*corev1.Secret, error)
	Update(context.Context, *corev1.Secret, metav1.UpdateOptions) (*corev1.Secret, error)
}, name, manifest string) error {
	sec, err := secrets.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("rewrite %s: %w", name, err)
	}
	rel, err := release.DecodeRelease(sec.Data["release"])
	if err != nil {
		return fmt.Errorf("rewrite %s: %w", name, err)
	}
	rel.Manifest = manifest
	if sec.Data["release"], err = release.EncodeRelease(rel); err != nil {
		return fmt.Errorf("rewrite %s: %w", name, err)
	}
	if _, err := secrets.Update(ctx, sec, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("rewrite %s: %w", name, err)
	}
	return nil
}
