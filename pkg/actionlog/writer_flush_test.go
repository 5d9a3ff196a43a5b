package actionlog

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/async-helm/async-helm/internal/fakekube"
)

// Attack: a tenant's chart fills its action's log (an upgrade of a few thousand objects
// logs a distinct "Created a new ConfigMap called ..." line each), then waits on a pod that
// never gets ready (Helm repeats "not ready" every 2 s for the whole --timeout, up to
// MAX_ACTION_TIME). Every repeat bumps the buffer's version, so each 3 s flush rewrites the
// whole ConfigMap in async-helm's own namespace: etcd writes (and history until compaction)
// that no tenant quota bounds. Over 10 minutes of waiting, the writes must stay within one
// full log per heartbeat (30 s) and the new lines.
func TestRepeatedNotReadyDoesNotRewriteAFullLogEveryFlush(t *testing.T) {
	checkWritesWhileWaiting(t, func(int) string {
		return Format("Deployment is not ready: %s/%s. %d out of %d expected pods are ready", "ns", "web", 0, 1)
	})
}

// Attack: waits that alternate between two lines (a StatefulSet with updateStrategy
// OnDelete before one that never becomes ready) were no repeat of the line before: every
// flush rewrote the whole log (34 MiB in 10 minutes for one action).
func TestAlternatingWaitLinesDoNotRewriteAFullLogEveryFlush(t *testing.T) {
	checkWritesWhileWaiting(t, func(i int) string {
		if i%2 == 0 {
			return "StatefulSet is not ready: ns/a. update strategy is OnDelete"
		}
		return "StatefulSet is not ready: ns/b. 0 out of 1 expected pods are ready"
	})
}

// Attack: a wait whose lines never repeat (a counter in a resource's status) changes the
// log at every flush: the write budget still bounds what the log writes.
func TestEverChangingLinesStayWithinTheWriteBudget(t *testing.T) {
	checkWritesWhileWaiting(t, func(i int) string {
		return fmt.Sprintf("Job ns/j is not ready: %d pods failed so far", i)
	})
}

// checkWritesWhileWaiting fills an action's log, logs line(i) every 2 s for 10 minutes
// with a flush every 3 s, and checks that the writes stay within one full log per heartbeat.
func checkWritesWhileWaiting(t *testing.T, line func(i int) string) {
	t.Helper()
	bg := context.Background()
	clock := fakekube.NewClock(time.Date(2026, 12, 3, 23, 0, 0, 0, time.UTC))
	c := fakekube.New(clock)
	store := &Store{Client: c, Namespace: "async-helm"}
	buf := NewBuffer(DefaultBytes, clock)
	w := NewWriter(store, buf, Record{Namespace: "ns", Name: "web", Revision: 2, RequestID: "r", Action: "upgrade"}, clock)
	for i := 0; buf.size < DefaultBytes-200; i++ {
		buf.Log("Created a new %s called %q in %s\n", "ConfigMap", fmt.Sprintf("filler-%05d-%s", i, "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"), "ns")
	}
	if err := w.Flush(bg, false); err != nil {
		t.Fatal(err)
	}
	var written, writes int
	const wait = 10 * time.Minute
	for ms := 0; ms < int(wait/time.Millisecond); ms += 1000 {
		clock.Add(time.Second)
		if ms%2000 == 0 {
			buf.Append(line(ms / 2000))
		}
		if ms%3000 == 0 {
			before := w.written
			if err := w.Flush(bg, false); err != nil {
				t.Fatal(err)
			}
			if !w.written.Equal(before) {
				cm, err := c.CoreV1().ConfigMaps("async-helm").Get(bg, ObjectName("ns", "web", 2), metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				written += len(cm.Data[dataKey])
				writes++
			}
		}
	}
	t.Logf("%d writes, %d KiB in %s", writes, written>>10, wait)
	full := DefaultBytes + DefaultBytes/2
	if limit := int(wait/HeartbeatEvery) * full; written > limit {
		t.Errorf("%d writes of the whole log, %d MiB in %s of waiting on one action (want at most %d KiB: a full log per heartbeat)",
			writes, written>>20, wait, limit>>10)
	}
}
