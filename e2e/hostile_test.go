package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"helm.sh/helm/v3/pkg/repo"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	"github.com/async-helm/async-helm/internal/testcharts/hostile"
	"github.com/async-helm/async-helm/pkg/api"
	chartrepos "github.com/async-helm/async-helm/pkg/chart/repos"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/submitclient"
)

// A hostile tenant: dev, with edit rights in namespaces of its own (and, in one more, the
// right to create chart repositories but not to read Secrets), tries every attack of issue
// #25 while the operator's 200 installs run in another namespace. The shared service must
// stay up (no restart: an endless or huge template dies in its render worker, not in the
// executor), every one of the 200 ends deployed, nothing runs as the operator on dev's
// records, submit's, the executor's and the notifier's peak RSS stay under their Knative
// limits, and each attack gets its clear answer. It runs beside the other tests: every
// stack's submit watches every namespace, so the other stacks meet dev's records too.
func TestHostileTenant(t *testing.T) {
	t.Parallel()
	victim, devNS, devNS2, slow, repoNS := cluster.Namespace(t), cluster.Namespace(t), cluster.Namespace(t),
		cluster.SlowNamespace(t), cluster.Namespace(t)
	for _, ns := range []string{devNS, devNS2, slow} {
		grantDev(t, ns, "edit")
	}
	grantRepoCreator(t, repoNS)
	limits := knativeMemory(t)
	withLimit := func(fn string, env map[string]string) map[string]string {
		env["GOMEMLIMIT"] = limits[fn].gomemlimit
		return env
	}
	s := newStackEnv(t, stackEnv{
		Submit: withLimit("submit", map[string]string{"MAX_QUEUED": "2000", "MAX_QUEUED_PER_NAMESPACE": "1000"}),
		// A render's CPU bound below its default (1m): the attack is the same, and each endless
		// render spins a core until its worker is killed.
		Executor: withLimit("executor", map[string]string{"RENDER_TIMEOUT": "5s"}),
		Notifier: withLimit("notifier", map[string]string{"SWEEP_INTERVAL": "2s", "REDRIVE_AFTER": "5s"}),
	}, victim, devNS, devNS2, slow, repoNS)
	dev := asDev(s)
	devClient := devKube(t)
	// Watches the executor (its RSS with its render workers'), and notes if it ever exits.
	watch := watchExecutor(s)

	// The attacks that need no burst first: the fakes must be in place before the burst.
	fakeQueued(t, devClient, []string{devNS, devNS2}, 1000)
	burst := startInstalls(t, s, victim, 200, 16)
	burst.abort = watch.exitedLog

	t.Run("undecodable record", func(t *testing.T) { undecodableRecord(t, s, dev, devClient, devNS) })
	t.Run("replayed event", func(t *testing.T) { replayedEvent(t, s, devClient, slow) })
	t.Run("nested chart bomb", func(t *testing.T) { chartBomb(t, dev, devNS) })
	t.Run("endless template", func(t *testing.T) { endlessTemplate(t, s, dev, devNS, watch) })
	t.Run("index credentials", func(t *testing.T) { indexCredentials(t, dev) })
	t.Run("repository credential exfiltration", func(t *testing.T) { repositoryExfil(t, s, dev, repoNS) })

	burst.wait(t, 6*time.Minute)
	ownPeak, withWorkers := watch.stop()
	if out := watch.exitedLog(); out != "" {
		t.Errorf("the executor exited during the attacks:\n%s", out)
	}
	for name, p := range map[string]interface{ Exited() bool }{"submit": s.submit, "notifier": s.notifier} {
		if p.Exited() {
			t.Errorf("%s exited during the attacks", name)
		}
	}
	checkPeakRSS(t, "submit", s.submit.Pid(), limits["submit"].limit)
	checkPeakRSS(t, "notifier", s.notifier.Pid(), limits["notifier"].limit)
	lim := limits["executor"].limit
	t.Logf("executor peak RSS %d MiB, with its render workers %d MiB (limit %d MiB)", ownPeak>>20, withWorkers>>20, lim>>20)
	if ownPeak == 0 || withWorkers > lim {
		t.Errorf("executor peak RSS %d MiB, with its render workers %d MiB: unknown or over its Knative limit %d MiB",
			ownPeak>>20, withWorkers>>20, lim>>20)
	}
}

// executorWatch samples the executor's memory, its own and with its render workers' (in a
// container they count against one limit), and keeps its log if it exits: it must not.
type executorWatch struct {
	s           *stack
	stopped     chan struct{}
	done        chan struct{}
	mu          sync.Mutex
	exited      string
	peak, total int64 // bytes: the executor's VmHWM; the largest sum of its and its children's VmRSS
}

func watchExecutor(s *stack) *executorWatch {
	w := &executorWatch{s: s, stopped: make(chan struct{}), done: make(chan struct{})}
	pid := s.executor.Pid()
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stopped:
				return
			case <-time.After(100 * time.Millisecond):
			}
			if s.executor.Exited() {
				w.mu.Lock()
				w.exited = tail(s.executor.Output())
				w.mu.Unlock()
				return
			}
			sum := procStatusKiB(pid, "VmRSS:")
			for _, child := range childrenOf(pid) {
				sum += procStatusKiB(child, "VmRSS:")
			}
			w.mu.Lock()
			w.peak = max(w.peak, peakRSS(pid)<<10)
			w.total = max(w.total, sum<<10, w.peak)
			w.mu.Unlock()
		}
	}()
	return w
}

// exitedLog is the tail of the executor's log if it exited, else "".
func (w *executorWatch) exitedLog() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.exited
}

// stop ends the sampling and returns the executor's peak RSS and its peak with its workers.
func (w *executorWatch) stop() (own, withWorkers int64) {
	close(w.stopped)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.peak, w.total
}

// peakRSS is a process's high-water mark of resident memory in KiB (0 when unknown).
func peakRSS(pid int) int64 { return procStatusKiB(pid, "VmHWM:") }

// procStatusKiB is one KiB field of /proc/<pid>/status (0 when unknown).
func procStatusKiB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field {
			kib, _ := strconv.ParseInt(f[1], 10, 64)
			return kib
		}
	}
	return 0
}

// grantDev binds a ClusterRole to dev in ns and waits until RBAC allows it.
func grantDev(t *testing.T, ns, clusterRole string) {
	t.Helper()
	bindDev(t, ns, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: clusterRole}, "create", "secrets", "")
}

// grantRepoCreator lets dev create ProjectHelmChartRepositories and ConfigMaps in ns, and
// read nothing else (no Secrets).
func grantRepoCreator(t *testing.T, ns string) {
	t.Helper()
	_, err := cluster.Client.RbacV1().Roles(ns).Create(context.Background(), &rbacv1.Role{
		ObjectMeta: metav1.ObjectMeta{Name: "repo-creator"},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"helm.openshift.io"}, Resources: []string{"projecthelmchartrepositories"}, Verbs: []string{"get", "list", "watch", "create", "delete"}},
			{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "create"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	bindDev(t, ns, rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "repo-creator"},
		"create", "projecthelmchartrepositories", "helm.openshift.io")
}

func bindDev(t *testing.T, ns string, ref rbacv1.RoleRef, verb, resource, group string) {
	t.Helper()
	ctx := context.Background()
	_, err := cluster.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "dev-" + strings.ToLower(ref.Name)}, RoleRef: ref,
		Subjects: []rbacv1.Subject{{Kind: "User", Name: "dev", APIGroup: "rbac.authorization.k8s.io"}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cluster.WaitDevAllowed(t, ns, verb, resource, group)
}

// asDev is a client of submit as dev.
func asDev(s *stack) *submitclient.Client {
	return &submitclient.Client{Server: s.submit.URL, Token: cluster.Dev.BearerToken}
}

func devKube(t *testing.T) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(cluster.Dev)
	cfg.QPS, cfg.Burst = 500, 1000 // 2,000 fake Secrets, not client-go's 5/s
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// fakeQueued makes n hand-made Secrets per namespace, as dev, with every label a queued
// reservation carries: they must not count toward submit's admission bound.
func fakeQueued(t *testing.T, c kubernetes.Interface, namespaces []string, n int) {
	t.Helper()
	start := time.Now()
	var wg sync.WaitGroup
	var failed atomic.Int64
	work := make(chan [2]string)
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for job := range work {
				name := job[1]
				_, err := c.CoreV1().Secrets(job[0]).Create(context.Background(), &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Name: release.SecretName(name, 1), Labels: map[string]string{
						release.LabelOwner: release.OwnerHelm, release.LabelName: name, release.LabelStatus: "pending-install",
						release.LabelVersion: "1", release.LabelRevision: "1", release.LabelQueued: "true",
						release.LabelRequestID: "fake-" + name,
					}},
					Type: release.SecretType,
				}, metav1.CreateOptions{})
				if err != nil {
					failed.Add(1)
				}
			}
		}()
	}
	for _, ns := range namespaces {
		for i := 0; i < n; i++ {
			work <- [2]string{ns, fmt.Sprintf("fake-%d", i)}
		}
	}
	close(work)
	wg.Wait()
	if f := failed.Load(); f > 0 {
		t.Fatalf("%d of the fake queued Secrets could not be created", f)
	}
	t.Logf("%d fake queued Secrets made by dev in %s", n*len(namespaces), time.Since(start).Round(time.Millisecond))
}

// installs is the operator's burst in the victim's namespace.
type installs struct {
	s        *stack
	ns       string
	n        int
	done     chan struct{}
	mu       sync.Mutex
	refused  []string
	accepted []string
	// abort, when set, says why waiting on is pointless ("" while it is not).
	abort func() string
}

func startInstalls(t *testing.T, s *stack, ns string, n, clients int) *installs {
	t.Helper()
	b := &installs{s: s, ns: ns, n: n, done: make(chan struct{})}
	next := make(chan int)
	var wg sync.WaitGroup
	for c := 0; c < clients; c++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				name := fmt.Sprintf("victim-%d", i)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				_, err := s.client.Install(ctx, api.ReleaseRequest{Name: name, Namespace: ns,
					ChartURL: s.charts.ChartURL("tiny", "0.1.0")})
				cancel()
				b.mu.Lock()
				if err != nil {
					b.refused = append(b.refused, fmt.Sprintf("%s: %v", name, err))
				} else {
					b.accepted = append(b.accepted, name)
				}
				b.mu.Unlock()
			}
		}()
	}
	go func() {
		for i := 0; i < n; i++ {
			next <- i
		}
		close(next)
		wg.Wait()
		close(b.done)
	}()
	return b
}

// wait checks that every install was accepted and reached deployed.
func (b *installs) wait(t *testing.T, within time.Duration) {
	t.Helper()
	<-b.done
	if len(b.refused) > 0 {
		t.Fatalf("%d of %d installs of the operator were refused during the attacks, first: %s", len(b.refused), b.n, b.refused[0])
	}
	deadline := time.Now().Add(within)
	for {
		rels, err := b.s.client.List(context.Background(), b.ns)
		deployed, other := 0, map[string]string{}
		if err == nil {
			for _, r := range rels {
				if st := r.Info.Status.String(); st == "deployed" {
					deployed++
				} else {
					other[r.Name] = st + ": " + r.Info.Description
				}
			}
			if deployed == b.n {
				t.Logf("all %d installs of the operator deployed", b.n)
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d installs deployed after %s (%v); others: %v", deployed, b.n, within, err, other)
		}
		if b.abort != nil {
			if why := b.abort(); why != "" {
				t.Fatalf("%d of %d installs deployed when waiting stopped: %s", deployed, b.n, why)
			}
		}
		time.Sleep(time.Second)
	}
}

// checkPeakRSS checks a process's high-water mark of resident memory.
func checkPeakRSS(t *testing.T, name string, pid int, limit int64) {
	t.Helper()
	kib := peakRSS(pid)
	if kib == 0 {
		t.Fatalf("%s: no VmHWM in /proc/%d/status", name, pid)
	}
	t.Logf("%s peak RSS %d MiB (limit %d MiB)", name, kib>>10, limit>>20)
	if kib<<10 > limit {
		t.Errorf("%s peak RSS %d MiB over its Knative limit %d MiB", name, kib>>10, limit>>20)
	}
}

// devCall calls submit as dev and returns the status and body.
func devCall(t *testing.T, s *stack, method, path string, body []byte, timeout time.Duration) (int, string, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, s.submit.URL+path, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+cluster.Dev.BearerToken)
	req.Header.Set("Content-Type", "application/json")
	start := time.Now()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: no answer in %s: %v", method, path, time.Since(start).Round(time.Millisecond), err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(out), time.Since(start)
}

// undecodableRecord: a Secret with Helm's labels, pending, queued and dead-lettered, whose
// record does not decode. Helm's driver dereferenced nil on it and the notifier exited.
func undecodableRecord(t *testing.T, s *stack, dev *submitclient.Client, c kubernetes.Interface, ns string) {
	_, err := c.CoreV1().Secrets(ns).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: release.SecretName("garbage", 1),
			Labels: map[string]string{release.LabelOwner: release.OwnerHelm, release.LabelName: "garbage",
				release.LabelStatus: "pending-install", release.LabelVersion: "1", release.LabelRevision: "1",
				release.LabelQueued: "true", release.LabelRequestID: "garbage"},
			Annotations: map[string]string{release.AnnotationDeadLettered: "true"}},
		Type: release.SecretType, Data: map[string][]byte{"release": []byte("garbage")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// Three sweeps (SWEEP_INTERVAL 2s) and a read of it through submit.
	time.Sleep(7 * time.Second)
	code, body, _ := devCall(t, s, http.MethodGet, api.PathRelease+"?ns="+ns+"&name=garbage", nil, 30*time.Second)
	if code < 400 || code >= 500 || !strings.Contains(body, "error") {
		t.Errorf("reading the undecodable record: %d %s, want a 4xx with a clear error", code, body)
	}
	t.Logf("undecodable record: submit answered %d %s", code, strings.TrimSpace(body))
	if _, err := dev.List(context.Background(), ns); err != nil {
		t.Errorf("listing the namespace with the undecodable record: %v", err)
	}
	if s.notifier.Exited() || s.submit.Exited() {
		t.Fatalf("a function exited on the undecodable record (notifier exited %v, submit exited %v)\n%s",
			s.notifier.Exited(), s.submit.Exited(), tail(s.notifier.Output()))
	}
}

// chartBomb: a few KiB of chart whose nested archives unpack to gigabytes.
func chartBomb(t *testing.T, dev *submitclient.Client, ns string) {
	bomb := hostile.Bomb(t, 12, 88<<20)
	t.Logf("chart bomb: %d bytes on the wire", len(bomb))
	srv := serveArchive(t, "bomb-0.1.0.tgz", bomb)
	_, err := dev.Install(context.Background(), api.ReleaseRequest{Name: "bomb", Namespace: ns, ChartURL: srv.URL + "/bomb-0.1.0.tgz"})
	var apiErr *submitclient.APIError
	if !asAPIError(err, &apiErr) || apiErr.Status != http.StatusUnprocessableEntity {
		t.Fatalf("install of the chart bomb: %v, want 422", err)
	}
	t.Logf("chart bomb: %d %s", apiErr.Status, apiErr.Message)
}

// endlessTemplate: a template that loops ~forever, rendered by submit and by the executor,
// and one that renders a 400 MiB string. Each install's render is killed in its worker (over
// its CPU bound, over its memory), its action fails with that reason, and the executor goes on.
func endlessTemplate(t *testing.T, s *stack, dev *submitclient.Client, ns string, watch *executorWatch) {
	srv := serveArchive(t, "endless-0.1.0.tgz", hostile.Endless(t))
	u := srv.URL + "/endless-0.1.0.tgz"
	body, _ := json.Marshal(api.ReleaseRequest{Name: "endless", Namespace: ns, ChartURL: u})
	code, out, took := devCall(t, s, http.MethodPost, api.PathTemplate, body, 2*time.Minute)
	t.Logf("endless template: %d after %s: %s", code, took.Round(time.Millisecond), strings.TrimSpace(out))
	if code < 400 || !strings.Contains(out, "error") {
		t.Errorf("template of an endless chart: %d %s, want a clear error", code, out)
	}
	huge := serveArchive(t, "huge-0.1.0.tgz", hostile.Archive(t, hostile.ChartYAML("huge"),
		hostile.Entry{Name: "huge/templates/cm.yaml", Data: []byte(hugeTemplate)}))
	// More endless installs than render workers (2): each fails once its CPU bound passes and
	// its worker is killed, and the next one gets a fresh worker.
	const endless = 4
	for i := 0; i < endless; i++ {
		if _, err := dev.Install(context.Background(), api.ReleaseRequest{Name: fmt.Sprintf("endless-%d", i), Namespace: ns, ChartURL: u}); err != nil {
			t.Fatalf("install endless-%d: %v", i, err)
		}
	}
	if _, err := dev.Install(context.Background(), api.ReleaseRequest{Name: "huge", Namespace: ns, ChartURL: huge.URL + "/huge-0.1.0.tgz"}); err != nil {
		t.Fatalf("install huge: %v", err)
	}
	for i := 0; i < endless; i++ {
		desc := waitFinal(t, s, ns, fmt.Sprintf("endless-%d", i), "failed", 4*time.Minute)
		// Its CPU bound (5s), or its wall-time bound when the cores are busy.
		if !strings.Contains(desc, "rendering took more than") {
			t.Errorf("endless-%d failed with %q, want its render's time bound (rendering took more than ...)", i, desc)
		}
	}
	if desc := waitFinal(t, s, ns, "huge", "failed", 4*time.Minute); !strings.Contains(desc, "the chart's templates used more than") {
		t.Errorf("huge failed with %q, want its render's memory bound (the chart's templates used more than ... MiB)", desc)
	}
	if out := watch.exitedLog(); out != "" {
		t.Fatalf("the executor exited on the endless and huge templates:\n%s", out)
	}
}

// hugeTemplate renders a 400 MiB string: over a render worker's memory (RENDER_MEMORY_MIB,
// 256 by default), within the executor's.
const hugeTemplate = `data: {{ repeat 419430400 "x" }}`

// waitFinal waits until a release is final, checks it is want, and returns its description.
func waitFinal(t *testing.T, s *stack, ns, name, want string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		rel, err := s.client.Get(context.Background(), ns, name)
		if err == nil && rel.Info != nil {
			if st := rel.Info.Status.String(); !release.IsPending(st) {
				if st != want {
					t.Fatalf("%s/%s ended %s (%s), want %s", ns, name, st, rel.Info.Description, want)
				}
				t.Logf("%s/%s %s: %s", ns, name, st, rel.Info.Description)
				return rel.Info.Description
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s/%s not final after %s (%v)", ns, name, within, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// indexCredentials: a cluster repository whose URL holds a password; the namespace-less
// index (no access review) must not show it in its warning.
func indexCredentials(t *testing.T, dev *submitclient.Client) {
	dc, err := dynamic.NewForConfig(cluster.Admin)
	if err != nil {
		t.Fatal(err)
	}
	sfx := randSuffix()
	createRepo(t, dc, "", "secretive-"+sfx, "secretive-"+sfx, "https://admin:hunter2-"+sfx+"@127.0.0.1:1/charts", false, nil)
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequest(http.MethodGet, dev.Server+api.PathChartIndex, nil)
		req.Header.Set("Authorization", "Bearer "+dev.Token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var idx repo.IndexFile
		_ = yaml.Unmarshal(b, &idx)
		warning := idx.Annotations[chartrepos.WarningAnnotation]
		if strings.Contains(string(b), "hunter2") {
			t.Fatalf("the index shows the repository's password: %q", warning)
		}
		if strings.Contains(warning, "secretive-"+sfx) {
			t.Logf("index warning, redacted: %s", warning)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the repository never showed in the index warning (%d, %q)", resp.StatusCode, warning)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// repositoryExfil: dev may create ProjectHelmChartRepositories and ConfigMaps in ns but not
// read its Secrets; it points one at its own https server naming a Secret it cannot read.
// The server must never see that Secret's password.
func repositoryExfil(t *testing.T, s *stack, dev *submitclient.Client, ns string) {
	ctx := context.Background()
	const password = "db-password-do-not-leak"
	if _, err := cluster.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-creds"},
		Data: map[string][]byte{"username": []byte("db"), "password": []byte(password)}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var leaked, asked atomic.Int64
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		if _, p, ok := r.BasicAuth(); ok && p == password {
			leaked.Add(1)
		}
		http.Error(w, "nothing here", http.StatusNotFound)
	}))
	defer srv.Close()
	devDyn, err := dynamic.NewForConfig(cluster.Dev)
	if err != nil {
		t.Fatal(err)
	}
	devCM := devKube(t).CoreV1().ConfigMaps(ns)
	if _, err := devCM.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "exfil-ca"},
		Data: map[string]string{"ca-bundle.crt": string(pemOf(srv))}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	createRepo(t, devDyn, ns, "exfil", "exfil", srv.URL, false, map[string]string{"basicAuthConfig": "db-creds", "ca": "exfil-ca"})
	// The background refresh, and dev asking for the namespace's index.
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		req, _ := http.NewRequest(http.MethodGet, dev.Server+api.PathChartIndex+"?namespace="+ns, nil)
		req.Header.Set("Authorization", "Bearer "+dev.Token)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
		time.Sleep(time.Second)
	}
	t.Logf("dev's repository server was asked %d times, with the Secret's password %d times", asked.Load(), leaked.Load())
	if leaked.Load() > 0 {
		t.Fatalf("submit sent the password of a Secret dev cannot read to dev's server %d times", leaked.Load())
	}
}

func pemOf(srv *httptest.Server) []byte {
	var b bytes.Buffer
	_ = pemEncodeCert(&b, srv.Certificate().Raw)
	return b.Bytes()
}

func serveArchive(t *testing.T, name string, archive []byte) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/"+name {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(archive)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// replayedEvent: the operator installs into a namespace where dev is an editor; dev reads
// the signed accepted event from the pending reservation, and once that install ended it
// recreates the revision (a new Secret under the same name, the operator's request id) and
// delivers the event to the executor itself (a cluster-local Service is reachable from any
// pod). The executor must not run the operator's action on dev's record.
func replayedEvent(t *testing.T, s *stack, c kubernetes.Interface, ns string) {
	ctx := context.Background()
	if _, err := s.client.Install(ctx, api.ReleaseRequest{Name: "prey", Namespace: ns, ChartURL: s.charts.ChartURL("tiny", "0.1.0"),
		Wait: true, Timeout: "5m"}); err != nil {
		t.Fatal(err)
	}
	secrets := c.CoreV1().Secrets(ns)
	key := release.SecretName("prey", 1)
	var captured *corev1.Secret
	for deadline := time.Now().Add(60 * time.Second); captured == nil; time.Sleep(100 * time.Millisecond) {
		if sec, err := secrets.Get(ctx, key, metav1.GetOptions{}); err == nil && len(sec.Data[release.DataEvent]) > 0 {
			captured = sec
		}
		if time.Now().After(deadline) {
			t.Fatal("dev never saw the stored event of the operator's pending install")
		}
	}
	if _, err := s.client.Cancel(ctx, ns, "prey"); err != nil {
		t.Fatal(err)
	}
	waitFinal(t, s, ns, "prey", "failed", 2*time.Minute)
	leases := cluster.Client.CoordinationV1().Leases(ns)
	for deadline := time.Now().Add(15 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := leases.Get(ctx, release.LeaseName("prey", 1), metav1.GetOptions{}); apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Lease of the cancelled install is still there after 15 s")
		}
	}
	if err := secrets.Delete(ctx, key, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	forged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: key, Labels: captured.Labels}, Type: captured.Type, Data: captured.Data}
	forged.Labels[release.LabelStatus] = "pending-install"
	made, err := secrets.Create(ctx, forged, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest(http.MethodPost, s.executor.URL+"/", bytes.NewReader(captured.Data[release.DataEvent]))
	req.Header.Set("Content-Type", "application/cloudevents+json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	t.Logf("replay delivered to the executor: %d %s", resp.StatusCode, strings.TrimSpace(string(b)))
	// The sweeper (every 2 s) sees the forged pending revision too: give both time to act,
	// watching for an executor taking the revision's Lease (it holds one while Helm runs).
	for deadline := time.Now().Add(12 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if l, err := leases.Get(ctx, release.LeaseName("prey", 1), metav1.GetOptions{}); err == nil {
			t.Fatalf("an executor took the Lease of dev's forged revision (holder %v): the operator's action ran again", l.Spec.HolderIdentity)
		}
	}
	now, err := secrets.Get(ctx, key, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		t.Log("replayed event: the forged revision is gone")
	case err != nil:
		t.Fatal(err)
	case now.UID != made.UID:
		t.Errorf("the forged revision was replaced (%s)", now.Labels[release.LabelStatus])
	case now.Labels[release.LabelStatus] == "deployed":
		t.Errorf("the forged revision ended deployed: the operator's install ran again on dev's record")
	case release.IsPending(now.Labels[release.LabelStatus]) && !bytes.Equal(now.Data["release"], made.Data["release"]):
		t.Errorf("Helm adopted dev's forged revision: its record was rewritten")
	default:
		t.Logf("replayed event: the forged revision is %s", now.Labels[release.LabelStatus])
	}
}

func pemEncodeCert(w io.Writer, der []byte) error {
	return pem.Encode(w, &pem.Block{Type: "CERTIFICATE", Bytes: der})
}

// Values that Helm's processing would copy past the chart's bounds: 10,000 request global
// keys over a chart of 1,000 subcharts (Helm's coalesce gives each subchart its own copy;
// one such install took submit to 960 MiB of its 512 Mi), and a chart of 2,000 subcharts
// each listing `dependencies: []` beside 20,000 values (Helm's dependency processing copies
// the values once for each, in the executor). Submit refuses both with a clear 422 before
// anything copies them; submit and the executor stay within their Knative memory limits.
func TestValuesCopiedPastTheChartsBoundsAreRefused(t *testing.T) {
	ns := cluster.Namespace(t)
	grantDev(t, ns, "edit")
	limits := knativeMemory(t)
	s := newStackEnv(t, stackEnv{Submit: map[string]string{"GOMEMLIMIT": limits["submit"].gomemlimit},
		Executor: map[string]string{"GOMEMLIMIT": limits["executor"].gomemlimit}}, ns)
	global, data := map[string]any{}, strings.Builder{}
	data.WriteString("data:\n")
	for i := range 20000 {
		global[fmt.Sprintf("k%d", i%10000)] = 1
		fmt.Fprintf(&data, "  k%d: 1\n", i)
	}
	for _, tc := range []struct {
		name, want string
		archive    []byte
		values     map[string]any
	}{
		{"globals", "once for each of its 1000 subcharts", subchartsArchive(t, "globals", 1000, "", ""), map[string]any{"global": global}},
		{"copies", "dependency processing copies its values", subchartsArchive(t, "copies", 2000, "dependencies: []\n", data.String()), nil},
	} {
		url := serveArchive(t, tc.name+"-0.1.0.tgz", tc.archive).URL + "/" + tc.name + "-0.1.0.tgz"
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		start := time.Now()
		_, err := asDev(s).Install(ctx, api.ReleaseRequest{Name: tc.name, Namespace: ns, ChartURL: url, Values: tc.values})
		cancel()
		t.Logf("%s (%d bytes on the wire): %v after %s", tc.name, len(tc.archive), err, time.Since(start).Round(time.Millisecond))
		if err == nil || !strings.Contains(err.Error(), "HTTP 422") || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a 422 naming %q", tc.name, err, tc.want)
		}
	}
	if s.submit.Exited() || s.executor.Exited() {
		t.Errorf("submit exited: %t, the executor exited: %t", s.submit.Exited(), s.executor.Exited())
	}
	checkPeakRSS(t, "submit", s.submit.Pid(), limits["submit"].limit)
	checkPeakRSS(t, "executor", s.executor.Pid(), limits["executor"].limit)
}

// subchartsArchive is a chart of subs directory subcharts (each Chart.yaml ending with
// subDeps) and one Chart.yaml entry, a schema, a template, and values.yaml values.
func subchartsArchive(t *testing.T, name string, subs int, subDeps, values string) []byte {
	t.Helper()
	es := []hostile.Entry{{Name: name + "/Chart.yaml", Data: []byte("apiVersion: v2\nname: " + name + "\nversion: 0.1.0\ndependencies:\n- {name: s0, version: 1.0.0}\n")},
		{Name: name + "/values.schema.json", Data: []byte(`{"type": "object"}`)}, {Name: name + "/values.yaml", Data: []byte(values)},
		{Name: name + "/templates/cm.yaml", Data: []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n")}}
	for j := range subs {
		es = append(es, hostile.Entry{Name: fmt.Sprintf("%s/charts/s%d/Chart.yaml", name, j), Data: []byte(fmt.Sprintf("apiVersion: v2\nname: s%d\nversion: 1.0.0\n%s", j, subDeps))})
	}
	return hostile.Archive(t, es...)
}

// A tenant's chart server sends each of 24 chart URLs 20 MiB less a byte and holds the last;
// dev asks the 24 installs at once. Submit fetched all 24 at once (nothing bounded downloads
// in flight); now a tenant's fetches take at most 3 of submit's 4 fetch slots, and submit
// stays within its Knative memory limit.
func TestSlowChartDownloadsKeepSubmitWithinItsLimit(t *testing.T) {
	const n, slots = 24, 3
	ns := cluster.Namespace(t)
	grantDev(t, ns, "edit")
	limits := knativeMemory(t)
	s := newStackEnv(t, stackEnv{Submit: map[string]string{"GOMEMLIMIT": limits["submit"].gomemlimit}}, ns)
	body, release := make([]byte, 20<<20-1), make(chan struct{})
	var sent atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(body)
		w.(http.Flusher).Flush()
		sent.Add(1)
		select { // the last byte comes only once the test has counted
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, _ = asDev(s).Install(ctx, api.ReleaseRequest{Name: fmt.Sprintf("slow-%d", i), Namespace: ns, ChartURL: fmt.Sprintf("%s/slow-%d.tgz", srv.URL, i)})
		}()
	}
	for start := time.Now(); sent.Load() < slots && time.Since(start) < time.Minute; {
		time.Sleep(100 * time.Millisecond)
	}
	time.Sleep(10 * time.Second) // what more submit would fetch, were a tenant's fetches not bounded
	got := sent.Load()
	close(release)
	wg.Wait()
	t.Logf("%d installs by dev: %d bodies of 20 MiB sent while the first ones hung", n, got)
	if got > slots || s.submit.Exited() {
		t.Errorf("%d bodies fetched at once for one tenant (want at most %d); submit exited: %t", got, slots, s.submit.Exited())
	}
	checkPeakRSS(t, "submit", s.submit.Pid(), limits["submit"].limit)
}
