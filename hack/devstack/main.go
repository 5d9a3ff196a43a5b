// Command devstack is `make run`: the three functions as local processes wired through the
// local Knative Eventing (make cluster-up) with config/knative's Broker and Triggers in the
// namespace async-helm (submit -> Broker -> executor; notifier -> Broker -> a Trigger -> an
// event log that prints each status event), the test charts served on loopback, and one
// release shown going pending -> deployed. Ctrl-C stops everything.
package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/eventing"
	"github.com/async-helm/async-helm/internal/knativeapply"
	"github.com/async-helm/async-helm/internal/localstack"
	"github.com/async-helm/async-helm/internal/operator"
	"github.com/async-helm/async-helm/internal/podprofile"
	"github.com/async-helm/async-helm/internal/proc"
	"github.com/async-helm/async-helm/internal/testchartrepo"
	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/function"
	"github.com/async-helm/async-helm/pkg/kube"
	"github.com/async-helm/async-helm/pkg/submitclient"
)

type options struct {
	bin, charts, logs, namespace string
	submitPort, executorPort     int
	notifierPort, eventsPort     int
	chartsPort                   int
	counts                       localstack.Counts
	exitAfterDemo                bool
	script                       string
	profile                      podprofile.Profile
}

func main() {
	var o options
	flag.StringVar(&o.bin, "bin", "bin", "directory of the built functions")
	flag.StringVar(&o.charts, "charts", "testdata/charts", "charts to serve")
	flag.StringVar(&o.logs, "logs", ".cache/run", "where the functions' logs go")
	flag.StringVar(&o.namespace, "namespace", "demo", "namespace of the demo release")
	flag.IntVar(&o.submitPort, "submit-port", 8080, "submit's port")
	flag.IntVar(&o.executorPort, "executor-port", 8081, "executor's port")
	flag.IntVar(&o.notifierPort, "notifier-port", 8082, "notifier's port")
	flag.IntVar(&o.eventsPort, "events-port", 8083, "event log sink's port")
	flag.IntVar(&o.chartsPort, "charts-port", 8079, "chart repository's port")
	flag.IntVar(&o.counts.Submit, "submits", 1, "instances of submit behind its address (make run SUBMITS=N)")
	flag.IntVar(&o.counts.Executor, "executors", 1, "instances of the executor behind its address (make run EXECUTORS=N)")
	flag.IntVar(&o.counts.Notifier, "notifiers", 1, "instances of the notifier behind its address (make run NOTIFIERS=N)")
	flag.BoolVar(&o.exitAfterDemo, "exit-after-demo", false, "stop once the demo release is deployed")
	flag.StringVar(&o.script, "script", "", "run this script against the stack (ASYNC_HELM_SERVER set), then stop")
	profile := flag.String("profile", "fast", "pod profile of the demo namespace (fast, slow, gitlab: see internal/podprofile)")
	flag.Parse()
	var err error
	if o.profile, err = podprofile.Parse(*profile); err != nil {
		fmt.Fprintln(os.Stderr, "make run:", err)
		os.Exit(1)
	}
	if err := choosePorts(&o); err != nil {
		fmt.Fprintln(os.Stderr, "make run:", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "make run:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	kubeconfig := os.Getenv("KUBECONFIG")
	if kubeconfig == "" {
		return fmt.Errorf("KUBECONFIG is not set (make run sets it to the local cluster's)")
	}
	if err := os.MkdirAll(o.logs, 0o755); err != nil {
		return err
	}
	// submit refuses system:masters (the local cluster's admin): the demo, the commands
	// printed below and the script call it as a ServiceAccount bound to cluster-admin.
	cl, err := kube.Open(kubeconfig)
	if err != nil {
		return err
	}
	token, err := operator.Token(ctx, cl.Typed, 12*time.Hour)
	if err != nil {
		return err
	}
	// The console's chart repository objects, read by submit and the executor.
	if err := knativeapply.InstallRepositoryCRDs(ctx, cl.Config); err != nil {
		return err
	}
	tokenFile := filepath.Join(o.logs, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return err
	}
	chartsURL, err := serveCharts(o)
	if err != nil {
		return err
	}
	eventsURL, err := serveEventLog(ctx, o.eventsPort)
	if err != nil {
		return err
	}
	url := func(p int) string { return fmt.Sprintf("http://127.0.0.1:%d", p) }
	key, err := randomKey()
	if err != nil {
		return err
	}
	if err := freshNamespace(ctx, cl); err != nil {
		return err
	}
	defer func() {
		// The Subscriptions' finalizers need the Knative controllers: delete while they run.
		err := cl.Typed.CoreV1().Namespaces().Delete(context.Background(), brokerNamespace, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			fmt.Fprintf(os.Stderr, "delete namespace %s: %v\n", brokerNamespace, err)
		}
	}()
	// The chart repository of the demo is on loopback; events are signed as in production.
	common := []string{"KUBECONFIG=" + kubeconfig, "CHART_REPOSITORIES=local=" + chartsURL,
		"ALLOW_LOOPBACK_CHARTS=true", "EVENT_SIGNING_KEY=" + key}
	// submit -> Broker -> executor through Knative: the Trigger's delivery (retries, dead
	// letters to the notifier) is Knative's own; each function's address spreads over its
	// instances as a Knative Service spreads over its pods.
	st, local, err := startStack(ctx, kubeconfig, cl, o, eventsURL, common)
	if err != nil {
		return err
	}
	defer func() {
		st.Stop()
		fmt.Printf("requests per instance: %s; %s; %s\nstopped submit, executor and notifier\n",
			st.Submit.Spread(), st.Executor.Spread(), st.Notifier.Spread())
	}()
	printRunning(o, st, local, chartsURL)
	if err := demoNamespace(ctx, cl, o); err != nil {
		return err
	}
	if o.script != "" {
		// The script tells its own story in the demo namespace.
		cmd := exec.CommandContext(ctx, "bash", o.script)
		cmd.Env = append(os.Environ(), "ASYNC_HELM_SERVER="+url(o.submitPort), "ASYNC_HELM_TOKEN="+token,
			"DEMO_NAMESPACE="+o.namespace, "DEMO_PROFILE="+string(o.profile))
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		return cmd.Run()
	}
	if err := demo(ctx, o, url(o.submitPort), token); err != nil {
		return err
	}
	fmt.Printf(`
Try (submit authenticates callers with their Kubernetes token and refuses system:masters;
%[4]s holds a token of %[5]s, bound to cluster-admin):
  export ASYNC_HELM_TOKEN=$(cat %[4]s)
  curl -s -H "Authorization: Bearer $ASYNC_HELM_TOKEN" -XPOST %[1]s/api/helm/release/async -d '{"name":"hello","namespace":"%[2]s","chart_url":"%[3]s/tiny-0.1.0.tgz","values":{"message":"hi"}}'
  curl -s -H "Authorization: Bearer $ASYNC_HELM_TOKEN" '%[1]s/api/helm/releases?ns=%[2]s&limitInfo=true'
  bin/oc-helm --server %[1]s -n %[2]s install web2 local/tiny --wait
  bin/oc-helm --server %[1]s -n %[2]s list
Ctrl-C stops everything.
`, url(o.submitPort), o.namespace, chartsURL, tokenFile, operator.User)
	if o.exitAfterDemo {
		return nil
	}
	<-ctx.Done()
	return nil
}

// printRunning says what runs where.
func printRunning(o options, st *localstack.Stack, local *eventing.Local, chartsURL string) {
	rss, _ := local.RSS()
	n := func(f *localstack.Function) string { return fmt.Sprintf("%s (%d instances)", f.URL, len(f.Instances)) }
	fmt.Printf("\nasync-helm is running (logs in %s/<function>-<i>.log, Knative's in %s/logs):\n  submit   %s -> Broker %s/async-helm\n  executor %s <- Trigger executor\n  notifier %s -> Broker -> Trigger event-log -> events printed below\n  charts   %s\n  Knative Eventing: %d processes, RSS %d MB; broker ingress %s\n\n",
		o.logs, eventing.Dir(mustGetwd()), n(st.Submit), brokerNamespace, n(st.Executor), n(st.Notifier), chartsURL, len(local.Pids), rss, st.Wiring.BrokerURL)
}

// notifierEnv: a script's story is told in its namespace only (the notifier of a shared
// cluster's other stacks, tests say, report and re-drive their own); make run watches all.
func notifierEnv(o options) []string {
	if o.script != "" {
		return []string{"NAMESPACES=" + o.namespace}
	}
	return nil
}

// serveCharts serves the chart directories as a repository.
func serveCharts(o options) (string, error) {
	dir, err := os.MkdirTemp("", "async-helm-charts")
	if err != nil {
		return "", err
	}
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", o.chartsPort))
	if err != nil {
		return "", err
	}
	r, err := testchartrepo.Start(o.charts, dir, ln)
	if err != nil {
		return "", err
	}
	return r.URL, nil
}

// serveEventLog prints each status event the notifier sends.
func serveEventLog(ctx context.Context, port int) (string, error) {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return "", err
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: function.EventHandler(
		func(_ context.Context, e cloudevents.Event) (*cloudevents.Event, cloudevents.Result) {
			if e.Type() == events.TypeProgress {
				var pc events.ProgressChange
				if err := e.DataAs(&pc); err == nil {
					fmt.Printf("EVENT %-40s %s revision %d: %s\n", e.Type(), e.Subject(), pc.Revision, pc.Progress)
					return nil, nil
				}
			}
			sc, err := events.ParseStatus(e)
			if err != nil {
				fmt.Printf("EVENT %s %s\n", e.Type(), e.ID())
				return nil, nil
			}
			line := fmt.Sprintf("EVENT %-40s %s revision %d chart %s-%s", e.Type(), e.Subject(), sc.Revision, sc.Chart, sc.ChartVersion)
			if sc.Reason != "" {
				line += " reason: " + sc.Reason
			}
			fmt.Println(line)
			return nil, nil
		})}
	go func() { _ = srv.Serve(ln) }()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	return "http://" + ln.Addr().String(), nil
}

// demoNamespace creates the demo namespace on the chosen pod profile, or moves an existing
// one to it (pods created afterwards follow the profile).
func demoNamespace(ctx context.Context, cl *kube.Clients, o options) error {
	nss := cl.Typed.CoreV1().Namespaces()
	want := o.profile.Annotations()
	ns, err := nss.Get(ctx, o.namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		_, err = nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: o.namespace, Annotations: want}}, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	changed := false
	for _, k := range []string{"scheduler.alpha.kubernetes.io/node-selector", "scheduler.alpha.kubernetes.io/defaultTolerations"} {
		if ns.Annotations[k] != want[k] {
			changed = true
			if want[k] == "" {
				delete(ns.Annotations, k)
			} else {
				if ns.Annotations == nil {
					ns.Annotations = map[string]string{}
				}
				ns.Annotations[k] = want[k]
			}
		}
	}
	if changed {
		_, err = nss.Update(ctx, ns, metav1.UpdateOptions{})
	}
	return err
}

// demo installs the tiny chart and shows it go pending-install -> deployed.
func demo(ctx context.Context, o options, submitURL, token string) error {
	name := fmt.Sprintf("demo-%d", time.Now().Unix()%100000)
	c := &submitclient.Client{Server: submitURL, Token: token}
	var sent time.Time
	var err error
	for i := 0; i < 100; i++ { // the submit's namespace cache may lag a just-created namespace
		sent = time.Now()
		_, err = c.Install(ctx, api.ReleaseRequest{Name: name, Namespace: o.namespace, IndexEntry: "tiny--local",
			Values: map[string]any{"message": "hello from make run"}, Wait: true, WaitForJobs: true})
		if err == nil || !strings.Contains(err.Error(), "namespace not found") {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	start := time.Now()
	if err != nil {
		return fmt.Errorf("demo install: %w", err)
	}
	fmt.Printf("POST %s -> 201 %s in %s\n", api.PathAsync, "sh.helm.release.v1."+name+".v1", time.Since(sent).Round(time.Millisecond))
	last := ""
	for {
		rel, err := c.Get(ctx, o.namespace, name)
		if err != nil {
			return err
		}
		if st := rel.Info.Status.String(); st != last {
			fmt.Printf("GET  %s -> %s/%s revision %d %s (%.1fs)\n", api.PathRelease, o.namespace, name, rel.Version, st, time.Since(start).Seconds())
			last = st
			if st == "deployed" {
				return nil
			}
			if st == "failed" {
				return fmt.Errorf("demo release failed: %s", rel.Info.Description)
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func randomKey() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// brokerNamespace is config/knative's own namespace: make run applies its Broker and
// Triggers as they are.
const brokerNamespace = "async-helm"

// freshNamespace (re)creates the namespace async-helm: one left by a run that did not end
// cleanly has Triggers for its old ports.
func freshNamespace(ctx context.Context, cl *kube.Clients) error {
	nss := cl.Typed.CoreV1().Namespaces()
	if ns, err := nss.Get(ctx, brokerNamespace, metav1.GetOptions{}); err == nil && ns.DeletionTimestamp == nil {
		fmt.Printf("deleting the namespace %s of an earlier run\n", brokerNamespace)
		if err := nss.Delete(ctx, brokerNamespace, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		_, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: brokerNamespace}}, metav1.CreateOptions{})
		if err == nil {
			return nil
		}
		if !apierrors.IsAlreadyExists(err) || time.Now().After(deadline) {
			return fmt.Errorf("namespace %s: %w", brokerNamespace, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// startStack wires the namespace async-helm through the local Knative to the functions'
// addresses (the ports of the flags) and starts the instances behind them.
func startStack(ctx context.Context, kubeconfig string, cl *kube.Clients, o options, eventLog string, common []string) (*localstack.Stack, *eventing.Local, error) {
	root := mustGetwd()
	local, err := eventing.Open(eventing.Dir(root), kubeconfig)
	if err != nil {
		return nil, nil, err
	}
	for _, fn := range []string{localstack.Submit, localstack.Executor, localstack.Notifier} {
		old, _ := filepath.Glob(filepath.Join(o.logs, fn+"*.log"))
		for _, f := range old {
			_ = os.Remove(f)
		}
	}
	t0 := time.Now()
	st, err := localstack.Start(ctx, localstack.Config{Knative: local, Rest: cl.Config, Namespace: brokerNamespace,
		ConfigDir: filepath.Join(root, "config", "knative"), EventLog: eventLog, WireTimeout: 2 * time.Minute,
		Bins: localstack.Bins(o.bin), Counts: o.counts, LogDir: o.logs, Env: common,
		Ports:       eventing.Functions{Submit: o.submitPort, Executor: o.executorPort, Notifier: o.notifierPort},
		FunctionEnv: map[string][]string{localstack.Notifier: notifierEnv(o)}})
	if err != nil {
		return nil, nil, err
	}
	fmt.Printf("Broker and %d Triggers of config/knative Ready, %d+%d+%d instances healthy in %.1fs\n", len(st.Wiring.Triggers),
		len(st.Submit.Instances), len(st.Executor.Instances), len(st.Notifier.Instances), time.Since(t0).Seconds())
	return st, local, nil
}

func mustGetwd() string {
	d, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return d
}

// choosePorts keeps each port given on the command line (and fails naming it when it is
// taken), and replaces a default that is taken by a free port.
func choosePorts(o *options) error {
	set := map[string]bool{}
	flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, p := range []struct {
		flag string
		port *int
	}{{"submit-port", &o.submitPort}, {"executor-port", &o.executorPort}, {"notifier-port", &o.notifierPort},
		{"events-port", &o.eventsPort}, {"charts-port", &o.chartsPort}} {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", *p.port))
		if err == nil {
			ln.Close()
			continue
		}
		if set[p.flag] {
			return fmt.Errorf("port %d of -%s is taken: choose another (make run RUN_ARGS=\"-%s=PORT\")", *p.port, p.flag, p.flag)
		}
		free, err := proc.FreePort()
		if err != nil {
			return err
		}
		fmt.Printf("port %d (-%s) is taken; using %d (make run RUN_ARGS=\"-%s=PORT\" to choose)\n", *p.port, p.flag, free, p.flag)
		*p.port = free
	}
	return nil
}
