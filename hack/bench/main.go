// Command bench is `make bench`: it measures async-helm against the local cluster and
// prints one table. Every figure stands beside a floor or baseline measured in the same run
// (raw Secret creates, the helm CLI, Helm's SDK, a plain watch), with the ratio, the target
// of issues 18, 28 and 30 and a verdict; the table also goes to .cache/bench/ as JSON. A missed target
// prints MISSED; only an error makes the exit status non-zero.
//
// Sections (-sections to choose): submit (closed loop at 1 and 50 clients, open loop,
// distinct users, chart cache), e2e (a burst through Knative vs helm install --wait),
// console (Helm SDK time-to-pending vs our cold time-to-201 for GitLab), read (list with
// limitInfo vs helm list -a), executor (vs helm CLI, warm and cold), notifier (latency under
// full-secret rewrites, RSS), burst (1,000 installs through the stack with the executor
// working: time-to-201 beside raw creates probed during the burst, completion vs the helm
// CLI with and without wait), executors (completion with 1, 2, 3 executors), scale (10,000
// pending revisions in 1,000 namespaces: admission, a sweeper pass, notifier RSS, the
// all-namespaces list), fairness (one tenant's burst beside another's installs, fairness.go),
// v4 (the Helm v4 engine's completion vs the helm v4 CLI, v4.go). -quick sizes everything
// down for a run of a few minutes.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"time"
)

// options size the run; -quick replaces the defaults with small ones.
type options struct {
	bin, helm, charts, out string
	sections               string
	quick                  bool

	single, concurrent int           // closed loop: requests at 1 client, at `clients`
	clients            int           // concurrent clients of the closed loop
	rates              []int         // open loop offered rates (/s)
	openFor            time.Duration // open loop duration per rate
	users, perUser     int           // distinct users, requests each
	cacheRuns          int           // submit restarts per chart (cold samples)
	burst, parallel    int           // e2e: installs, helm CLI parallelism (= executor slots)
	consoleRuns        int           // GitLab installs with the SDK
	listSizes          []int         // releases in the listed namespace
	listRuns           int           // list requests per size (helm list -a runs: listRuns/4, at least 3)
	execRuns           int           // executor vs helm CLI, per mode
	notifierReleases   int           // release secrets the notifier watches
	payloadKiB         int           // their size
	changeRate         int           // full-secret rewrites per second
	changes            int           // rewrites timed
	failedEvery        int           // every n-th rewrite is a failure
	burstInstalls      int           // burst: installs without wait (and the helm CLI's)
	burstWaitInstalls  int           // burst: installs with wait (fast pods)
	burstClients       int           // burst: total concurrency of submit's clients and of the helm CLI
	probeRate          int           // burst: raw Secret creates per second during the burst
	finalTimeout       time.Duration // burst, executors: how long a burst may take to finish
	executorCounts     []int         // executors: how many executors behind the round-robin, per run
	executorInstalls   int           // executors: installs with wait per run
	scaleNamespaces    int           // scale: namespaces holding pending revisions
	scalePending       int           // scale: pending revisions across them
	scaleReadable      int           // scale: namespaces the listing user may read
	scaleRuns          int           // scale: admission requests per measurement
	scaleListRuns      int           // scale: all-namespaces lists (and rounds of one-by-one lists)
	fairInstalls       int           // fairness: tenant A's burst (fairness.go)
	repeats            int           // short rows measured this many times in the run (median and spread)
	cpuRate            int           // cpu: open-loop rate of both sides
	cpuFor             time.Duration // cpu: how long each side runs
	gitlabRuns         int           // executor: GitLab installs per mode, each side
	bigDir             string        // bigcluster: state directory of the second local cluster
	bigReleases        int           // bigcluster: releases written with Helm's driver
	bigRevisions       int           // bigcluster: revisions of each
	bigNamespaces      int           // bigcluster: namespaces they are spread over
	bigPending         int           // bigcluster: pending reservations of ours
}

func defaults(quick bool) options {
	if quick {
		return options{single: 100, concurrent: 500, clients: 50, rates: []int{50, 200, 400}, openFor: 3 * time.Second,
			users: 20, perUser: 5, cacheRuns: 1, burst: 8, parallel: 4, consoleRuns: 1, listSizes: []int{100, 1000},
			listRuns: 8, execRuns: 2, notifierReleases: 500, payloadKiB: 100, changeRate: 50, changes: 100, failedEvery: 5,
			burstInstalls: 100, burstWaitInstalls: 40, burstClients: 50, probeRate: 20, finalTimeout: 10 * time.Minute, executorCounts: []int{1, 2, 3}, executorInstalls: 24,
			scaleNamespaces: 100, scalePending: 1000, scaleReadable: 10, scaleRuns: 50, scaleListRuns: 3,
			repeats: 3, cpuRate: 200, cpuFor: 3 * time.Second, gitlabRuns: 1, fairInstalls: 100,
			bigReleases: 500, bigRevisions: 10, bigNamespaces: 50, bigPending: 500}
	}
	return options{single: 300, concurrent: 2000, clients: 50, rates: []int{50, 200, 400}, openFor: 10 * time.Second,
		users: 20, perUser: 25, cacheRuns: 3, burst: 40, parallel: 4, consoleRuns: 3, listSizes: []int{100, 1000, 10000},
		listRuns: 20, execRuns: 10, notifierReleases: 5000, payloadKiB: 100, changeRate: 50, changes: 500, failedEvery: 5,
		burstInstalls: 1000, burstWaitInstalls: 150, burstClients: 50, probeRate: 20, finalTimeout: 15 * time.Minute, executorCounts: []int{1, 2, 3}, executorInstalls: 50,
		scaleNamespaces: 1000, scalePending: 10000, scaleReadable: 10, scaleRuns: 200, scaleListRuns: 5,
		repeats: 3, cpuRate: 200, cpuFor: 10 * time.Second, gitlabRuns: 2, fairInstalls: 1000,
		bigReleases: 10000, bigRevisions: 10, bigNamespaces: 1000, bigPending: 10000}
}

const allSections = "submit,cpu,e2e,console,read,executor,notifier,burst,executors,scale,fairness,bigcluster,v4"

func main() {
	serveHopFloorIfAsked()
	quick := false
	for _, a := range os.Args[1:] {
		if a == "-quick" || a == "--quick" || a == "-quick=true" {
			quick = true
		}
	}
	o := defaults(quick)
	flag.BoolVar(&o.quick, "quick", quick, "small sizes: a run of a few minutes while developing")
	flag.StringVar(&o.bin, "bin", "bin", "built functions")
	flag.StringVar(&o.helm, "helm", ".cache/localcluster/bin/helm", "helm CLI built from the same helm.sh/helm/v3")
	flag.StringVar(&o.charts, "charts", "testdata/charts", "charts served on loopback (tiny, GitLab and its offline values)")
	flag.StringVar(&o.out, "out", ".cache/bench", "where the JSON goes")
	flag.StringVar(&o.sections, "sections", allSections, "sections to run, comma-separated")
	flag.IntVar(&o.single, "single", o.single, "closed loop: requests from 1 client")
	flag.IntVar(&o.concurrent, "concurrent", o.concurrent, "closed loop: requests from -clients clients")
	flag.IntVar(&o.clients, "clients", o.clients, "closed loop: concurrent clients")
	rates := flag.String("rates", joinInts(o.rates), "open loop: offered rates per second")
	flag.DurationVar(&o.openFor, "open-for", o.openFor, "open loop: duration of each rate")
	flag.IntVar(&o.users, "users", o.users, "distinct users (ServiceAccounts with their own RoleBinding)")
	flag.IntVar(&o.perUser, "per-user", o.perUser, "requests per distinct user")
	flag.IntVar(&o.cacheRuns, "cache-runs", o.cacheRuns, "chart cache: submit restarts per chart")
	flag.IntVar(&o.burst, "burst", o.burst, "e2e: installs in the burst")
	flag.IntVar(&o.parallel, "parallel", o.parallel, "e2e: executor slots and helm CLI parallelism")
	flag.IntVar(&o.consoleRuns, "console-runs", o.consoleRuns, "console: GitLab installs with the Helm SDK (and cold submits)")
	sizes := flag.String("list-sizes", joinInts(o.listSizes), "read: releases in the listed namespace")
	flag.IntVar(&o.listRuns, "list-runs", o.listRuns, "read: list requests per size")
	flag.IntVar(&o.execRuns, "exec-runs", o.execRuns, "executor vs helm CLI: runs per mode (warm, cold)")
	flag.IntVar(&o.notifierReleases, "notifier-releases", o.notifierReleases, "notifier: release secrets watched")
	flag.IntVar(&o.payloadKiB, "payload-kib", o.payloadKiB, "notifier: size of each")
	flag.IntVar(&o.changeRate, "change-rate", o.changeRate, "notifier: full-secret rewrites per second")
	flag.IntVar(&o.changes, "changes", o.changes, "notifier: rewrites timed")
	flag.IntVar(&o.failedEvery, "failed-every", o.failedEvery, "notifier: every n-th rewrite marks the revision failed")
	flag.IntVar(&o.burstInstalls, "burst-installs", o.burstInstalls, "burst: installs without wait, through the stack and with the helm CLI")
	flag.IntVar(&o.burstWaitInstalls, "burst-wait-installs", o.burstWaitInstalls, "burst: installs with wait (fast pods), each side")
	flag.IntVar(&o.burstClients, "burst-clients", o.burstClients, "burst: concurrent clients of submit, and helm CLI processes at a time")
	flag.IntVar(&o.probeRate, "probe-rate", o.probeRate, "burst: raw Secret creates per second sent during the burst (the floor)")
	flag.DurationVar(&o.finalTimeout, "final-timeout", o.finalTimeout, "burst, executors: past this a burst's rows say NOT FINISHED and the bench goes on")
	counts := flag.String("executors", joinInts(o.executorCounts), "executors: executor counts behind the round-robin, one run each")
	flag.IntVar(&o.executorInstalls, "executor-installs", o.executorInstalls, "executors: installs with wait per run")
	flag.IntVar(&o.scaleNamespaces, "scale-namespaces", o.scaleNamespaces, "scale: namespaces holding the pending revisions")
	flag.IntVar(&o.scalePending, "scale-pending", o.scalePending, "scale: pending revisions across them")
	flag.IntVar(&o.scaleReadable, "scale-readable", o.scaleReadable, "scale: namespaces the listing user may read")
	flag.IntVar(&o.scaleRuns, "scale-runs", o.scaleRuns, "scale: admission requests per measurement")
	flag.IntVar(&o.scaleListRuns, "scale-list-runs", o.scaleListRuns, "scale: all-namespaces lists after the first, and rounds of one-by-one lists")
	flag.IntVar(&o.repeats, "repeats", o.repeats, "short rows (open and closed loops, CPU, notifier, admission): repetitions in the run")
	flag.IntVar(&o.cpuRate, "cpu-rate", o.cpuRate, "cpu: open-loop rate of raw creates and of submit")
	flag.DurationVar(&o.cpuFor, "cpu-for", o.cpuFor, "cpu: duration of each side")
	flag.IntVar(&o.gitlabRuns, "gitlab-runs", o.gitlabRuns, "executor: GitLab installs per mode (warm, cold), each side")
	flag.IntVar(&o.fairInstalls, "fair-installs", o.fairInstalls, "fairness: tenant A's burst of installs")
	flag.StringVar(&o.bigDir, "big-dir", ".bigcluster", "bigcluster: state directory of the second local cluster (removed afterwards)")
	flag.IntVar(&o.bigReleases, "big-releases", o.bigReleases, "bigcluster: releases written with Helm's driver")
	flag.IntVar(&o.bigRevisions, "big-revisions", o.bigRevisions, "bigcluster: revisions of each release")
	flag.IntVar(&o.bigNamespaces, "big-namespaces", o.bigNamespaces, "bigcluster: namespaces the releases are spread over")
	flag.IntVar(&o.bigPending, "big-pending", o.bigPending, "bigcluster: pending reservations of ours")
	flag.Parse()
	var err error
	if o.rates, err = parseInts(*rates); err == nil {
		o.listSizes, err = parseInts(*sizes)
	}
	if err == nil {
		o.executorCounts, err = parseInts(*counts)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, o options) error {
	b, err := newBench(ctx, o)
	if err != nil {
		return err
	}
	defer b.close()
	sections := map[string]func(context.Context) error{
		"submit": b.submitSection, "cpu": b.cpuSection, "e2e": b.e2eSection, "console": b.consoleSection,
		"read": b.readSection, "executor": b.executorSection, "notifier": b.notifierSection,
		"burst": b.burstSection, "executors": b.executorsSection, "scale": b.scaleSection,
		"fairness": b.fairnessSection, "bigcluster": b.bigClusterSection, "v4": b.v4Section,
	}
	for _, name := range strings.Split(o.sections, ",") {
		fn, ok := sections[strings.TrimSpace(name)]
		if !ok {
			return fmt.Errorf("no section %q (have %s)", name, allSections)
		}
		b.awaitNamespacesDeleted(ctx)
		t0 := time.Now()
		b.logf("== %s", name)
		if err := fn(ctx); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		b.logf("== %s took %s", name, time.Since(t0).Round(time.Second))
	}
	return b.report()
}
