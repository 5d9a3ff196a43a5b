package chaos

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/localstack"
	"github.com/async-helm/async-helm/internal/proc"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// Scenario 5: two of everything. A burst of Scale installs through several submits,
// executors and notifiers (each function behind one address that spreads requests over its
// instances), with one executor SIGKILLed and restarted during it (Knative restarts a
// killed container) and one notifier SIGKILLed for good (the others must do its work).
// Every 201 ends deployed; each revision's Helm action runs to its end once (the executors'
// "action finished" lines, read once every executor has stopped; a revision the killed
// executor held may have none: the SIGKILL can cut its run after Helm's last write); the
// status sink sees every revision's deployed event. Each revision's request is bound to it
// on its consumed record, in async-helm's namespace (checkConsumed).
func (r *run) scale(ctx context.Context) error {
	if r.cfg.Scale == 0 {
		return nil
	}
	ns, err := r.namespace(ctx, "scale")
	if err != nil {
		return err
	}
	defer r.cleanup(ns)
	sink := newSink()
	defer sink.close()
	counts := r.cfg.ScaleCounts
	slots := r.cfg.ScaleSlots
	if slots == 0 {
		slots = (64 + max(counts.Executor, 1) - 1) / max(counts.Executor, 1)
	}
	st, stop, err := r.stack(ctx, stackOpts{ns: ns, sink: sink.url, counts: &counts,
		submitEnv: []string{fmt.Sprintf("MAX_QUEUED_PER_NAMESPACE=%d", 2*r.cfg.Scale)},
		// The executors log each Helm action they finish ("action finished", info).
		executorEnv: []string{"LOG_LEVEL=info", fmt.Sprintf("MAX_PARALLEL=%d", slots)}})
	if err != nil {
		return err
	}
	defer stop()
	watched, err := watchHolders(ctx, r.cl.Typed, ns)
	if err != nil {
		return err
	}
	defer watched.stop()
	start := time.Now()
	killed := make(chan scaleKills, 1)
	go func() { killed <- r.killScale(ctx, st, ns, watched) }()
	res := r.send(ctx, ns, "s", r.cfg.Scale, cmp.Or(r.cfg.ScaleWait, 10*time.Minute))
	revs, err := r.waitFinal(ctx, ns)
	if err != nil {
		return err
	}
	last := time.Since(start)
	k := <-killed
	deployed, failed, pending := r.tally(ctx, ns, revs, res.accepted)
	stopExecutors(st)
	runs, err := finishedRuns(r.cfg.LogDir, ns)
	if err != nil {
		return err
	}
	once, maxRuns := r.checkRuns(revs, res.accepted, runs.finished, k.held)
	bound := r.checkConsumed(ctx, revs, res.accepted)
	lost := r.waitReported(sink, ns, revs, res.accepted)
	r.rep.count("%d submits, %d executors (%d slots each), %d notifiers: burst of %d installs from %d clients, %s: %d accepted (%.0f/s), %d deployed, %d failed, %d pending; "+
		"Helm runs finished: %d of %d accepted revisions once, at most %d per revision; %d bound to their run on a consumed record; %d runs cut by the SIGKILL and run again; "+
		"%d runs abandoned after another executor took their expired Lease (%d still waiting for a CPU slot); "+
		"deployed reported for %d of %d (%d lost); last final after %s (%.2f completed/s); %s",
		len(st.Submit.Instances), len(st.Executor.Instances), slots, len(st.Notifier.Instances), r.cfg.Scale, r.cfg.BurstClients, k.what,
		len(res.accepted), float64(len(res.accepted))/res.took.Seconds(), deployed, failed, pending,
		once, len(res.accepted), maxRuns, bound, len(k.cut), runs.abandoned, runs.early, deployed-lost, deployed, lost,
		last.Round(time.Second), float64(deployed)/last.Seconds(), spread(st))
	return nil
}

// scaleKills is what killScale did: which instances, the revisions whose Helm run the
// executor's SIGKILL cut (their Leases still named it), and every revision it held before
// it died (those, and those whose Lease another executor took over meanwhile).
type scaleKills struct {
	what      string
	cut, held map[string]bool
}

// killScale SIGKILLs one executor a few seconds into the burst, while it runs Helm, and
// restarts it, then SIGKILLs a notifier (the leader when one holds the election Lease) for good.
func (r *run) killScale(ctx context.Context, st *localstack.Stack, ns string, watched *holders) scaleKills {
	k := scaleKills{cut: map[string]bool{}, held: map[string]bool{}}
	if !pause(ctx, randomDuration(3*time.Second, 8*time.Second)) {
		return k
	}
	i, executor := r.busyExecutor(ctx, st, ns)
	name := localstack.InstanceName(localstack.Executor, i)
	executor.Kill()
	// The executor holds a revision's Lease while Helm runs and deletes it after: those
	// still naming it were cut (they expire, and another executor runs them again).
	// Before the restart: what its next life holds is not what the SIGKILL cut.
	k.cut, k.held = r.killedRuns(ctx, ns, name, watched)
	r.cfg.Logf("%s killed during the burst, %d Helm runs cut, %d revisions held before", name, len(k.cut), len(k.held))
	time.Sleep(randomDuration(200*time.Millisecond, time.Second))
	if err := executor.Restart(); err != nil {
		r.rep.violate("%s restart: %v", name, err)
	}
	k.what = name + " SIGKILLed and restarted"
	if len(st.Notifier.Instances) < 2 || !pause(ctx, randomDuration(2*time.Second, 5*time.Second)) {
		return k
	}
	j, leader, isLeader := r.notifierToKill(ctx, st)
	killedAt := time.Now()
	leader.Kill()
	r.cfg.Logf("%s killed for good during the burst", j)
	k.what += ", " + j + " SIGKILLed for good"
	if isLeader {
		k.what += r.takeover(ctx, st, j, killedAt)
	}
	return k
}

// killedRuns says, right after the instance name was SIGKILLed, which revisions' Leases
// still name it (cut: their runs end nowhere) and which it held at any time (held).
func (r *run) killedRuns(ctx context.Context, ns, name string, watched *holders) (cut, held map[string]bool) {
	cut = r.heldBy(ctx, ns, name)
	held = watched.heldBy(name)
	for lease := range cut {
		held[lease] = true
	}
	return cut, held
}

// takeover waits until another notifier holds the election Lease and says after how long
// (client-go's bound: the Lease's duration plus two retry periods with jitter).
func (r *run) takeover(ctx context.Context, st *localstack.Stack, killed string, at time.Time) string {
	deadline := at.Add(r.cfg.Timeout)
	for time.Now().Before(deadline) {
		for i := range st.Notifier.Instances {
			name := localstack.InstanceName(localstack.Notifier, i)
			if !strings.HasPrefix(killed, name+" ") && r.heldBy(ctx, r.own, name)[st.NotifierLease] {
				return fmt.Sprintf(" (%s led after %.1fs)", name, time.Since(at).Seconds())
			}
		}
		if !pause(ctx, 200*time.Millisecond) {
			break
		}
	}
	r.rep.violate("no notifier took over the election Lease %s after %s was killed", st.NotifierLease, killed)
	return " (no notifier took over)"
}

// busyExecutor waits (up to a minute) until an executor holds a revision's Lease, that is
// runs Helm, and picks the one holding most: a kill then cuts runs in flight. Else any.
func (r *run) busyExecutor(ctx context.Context, st *localstack.Stack, ns string) (int, *proc.Process) {
	for range 300 {
		best, most := 0, 0
		for i := range st.Executor.Instances {
			if n := len(r.heldBy(ctx, ns, localstack.InstanceName(localstack.Executor, i))); n > most {
				best, most = i, n
			}
		}
		if most > 0 {
			return best, st.Executor.Instances[best]
		}
		if !pause(ctx, 200*time.Millisecond) {
			break
		}
	}
	return anyInstance(st.Executor)
}

func pause(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// heldBy lists the Leases of ns that the instance name holds (holdsAs).
func (r *run) heldBy(ctx context.Context, ns, name string) map[string]bool {
	out := map[string]bool{}
	leases, err := r.cl.Typed.CoordinationV1().Leases(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		r.rep.violate("list the Leases of %s: %v", ns, err)
		return out
	}
	for _, l := range leases.Items {
		if h := l.Spec.HolderIdentity; h != nil && holdsAs(*h, name) {
			out[l.Name] = true
		}
	}
	return out
}

// notifierToKill is the leader of the stack's notifiers (the holder of its election Lease,
// in async-helm's own namespace), else the first.
func (r *run) notifierToKill(ctx context.Context, st *localstack.Stack) (string, interface{ Kill() }, bool) {
	for i, p := range st.Notifier.Instances {
		name := localstack.InstanceName(localstack.Notifier, i)
		if r.heldBy(ctx, r.own, name)[st.NotifierLease] {
			return name + " (the leader)", p, true
		}
	}
	return localstack.InstanceName(localstack.Notifier, 0) + " (no leader found)", st.Notifier.Instances[0], false
}

// runCount is what the executors' logs say of one scenario's Helm runs.
type runCount struct {
	// finished counts, by revision (Lease and Secret name), the actions that ran to their
	// end and whose outcome counts: an "action finished" line not preceded by "action
	// abandoned after losing the lease" (a run whose Lease another executor took: fenced,
	// nothing it writes lands; the other's run is the one that counts), and an abandoned
	// run whose Helm returned no error: it wrote its final record before the loss was seen
	// (a renewal late on a starved machine), so it is the revision's run, and a second one
	// after it would be Helm running twice.
	finished map[string]int
	// abandoned counts those lost runs, and early those that lost their Lease still
	// waiting for a CPU slot, before Helm started.
	abandoned, early int
}

// logLine is the part of an executor's log line the count reads.
type logLine struct {
	Message, Namespace, Release, Error string
	Revision                           int
}

// finishedRuns reads the executors' logs under logDir for ns.
func finishedRuns(logDir, ns string) (runCount, error) {
	c := runCount{finished: map[string]int{}}
	logs, err := filepath.Glob(filepath.Join(logDir, localstack.Executor+"-*.log"))
	if err != nil {
		return c, err
	}
	for _, path := range logs {
		if err := c.read(path, ns); err != nil {
			return c, err
		}
	}
	return c, nil
}

func (c *runCount) read(path, ns string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	lost := map[string]bool{} // abandoned, its "action finished" line to come
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		var l logLine
		if json.Unmarshal(sc.Bytes(), &l) != nil || l.Namespace != ns {
			continue
		}
		rev := release.LeaseName(l.Release, l.Revision)
		switch {
		case l.Message == "action abandoned after losing the lease":
			lost[rev] = true
			c.abandoned++
			if strings.HasPrefix(l.Error, "waiting for a CPU slot") {
				c.early++
			}
			if l.Error == "" {
				c.finished[rev]++
			}
		case l.Message == "action finished" && lost[rev]:
			delete(lost, rev)
		case l.Message == "action finished":
			c.finished[rev]++
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// checkRuns wants one finished run per accepted revision: never two; none only for a
// revision the killed executor held (its run may have finished Helm and died before its
// line). The executors that lived were stopped first: each logged the end of its runs.
func (r *run) checkRuns(revs map[string][]release.Revision, accepted []string, runs map[string]int, killed map[string]bool) (once, maxRuns int) {
	for _, name := range accepted {
		for _, rev := range revs[name] {
			n := runs[rev.SecretName]
			maxRuns = max(maxRuns, n)
			switch {
			case n == 1:
				once++
			case n > 1:
				r.rep.violate("%s revision %d: Helm ran %d times to its end", name, rev.Version, n)
			case !killed[rev.SecretName]:
				r.rep.violate("%s revision %d is %s with no Helm run logged", name, rev.Version, rev.Status)
			}
		}
	}
	return once, maxRuns
}

// waitReported waits until the sink saw the deployed event of every accepted revision that
// ended deployed, and returns how many it never saw.
func (r *run) waitReported(s *sink, ns string, revs map[string][]release.Revision, accepted []string) int {
	want := map[string]bool{}
	for _, name := range accepted {
		for _, rev := range revs[name] {
			if rev.Status == "deployed" {
				want[events.StatusEventID(ns, name, rev.Version, "deployed", rev.RequestID)] = true
			}
		}
	}
	deadline := time.Now().Add(r.cfg.Timeout)
	for time.Now().Before(deadline) && s.missing(want) > 0 {
		time.Sleep(500 * time.Millisecond)
	}
	lost := s.missing(want)
	if lost > 0 {
		r.rep.violate("%d of %d deployed revisions never reported to the sink", lost, len(want))
	}
	return lost
}

// stopExecutors stops every executor (SIGTERM; each waits for its handlers), so that
// each run not cut by a SIGKILL has logged its end before the logs are read.
func stopExecutors(st *localstack.Stack) {
	var wg sync.WaitGroup
	for _, p := range st.Executor.Instances {
		if p.Exited() {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); p.Stop() }()
	}
	wg.Wait()
}
