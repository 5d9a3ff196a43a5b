package main

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// The open loop's note names what shared the machine with each side: the CPU of every process
// between two snapshots, summed per command, busiest first, as a share of one core.
func TestBusiestSumsACommandsProcessesBetweenSnapshots(t *testing.T) {
	root := t.TempDir()
	comm := func(pid int, name string) {
		if err := os.WriteFile(filepath.Join(root, strconv.Itoa(pid), "comm"), []byte(name+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	writeStat(t, root, 10, 1, 100, 0, 0, 0) // kube-apiserver
	writeStat(t, root, 11, 1, 50, 0, 0, 0)  // etcd
	writeStat(t, root, 12, 1, 10, 0, 0, 0)  // a worker
	comm(10, "kube-apiserver")
	comm(11, "etcd")
	comm(12, "worker")
	before := snapshotProcs(root)
	writeStat(t, root, 10, 1, 150, 10, 0, 0) // +60 ticks
	writeStat(t, root, 11, 1, 70, 0, 0, 0)   // +20
	writeStat(t, root, 13, 1, 30, 0, 0, 0)   // a second worker, started between: +30
	comm(13, "worker")
	after := snapshotProcs(root)
	before.at, after.at = time.Unix(0, 0), time.Unix(1, 0) // one second of wall time
	if got, want := busiest(before, after, 2), "kube-apiserver 60%, worker 30%"; got != want {
		t.Errorf("busiest = %q, want %q", got, want)
	}
	if got, want := busiest(before, after, 5), "kube-apiserver 60%, worker 30%, etcd 20%"; got != want {
		t.Errorf("busiest of 5 = %q, want %q (a command that used nothing is left out)", got, want)
	}
}
