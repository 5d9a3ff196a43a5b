package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// writeStat writes a /proc/<pid>/stat under root with the fields the CPU rows read, in clock
// ticks; the command holds a space and a ')' as a process may name itself.
func writeStat(t *testing.T, root string, pid, ppid, utime, stime, cutime, cstime int) {
	t.Helper()
	dir := filepath.Join(root, strconv.Itoa(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf("%d (render worker) x) S %d 1 1 0 -1 4194560 100 0 0 0 %d %d %d %d 20 0 8 0 1 1 1\n",
		pid, ppid, utime, stime, cutime, cstime)
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
}

// The executor's CPU per install counts its render workers: its own CPU, what its children
// that exited used (waited for), and its live descendants', not another process's.
func TestTreeCPUCountsTheWorkers(t *testing.T) {
	root := t.TempDir()
	writeStat(t, root, 100, 1, 30, 10, 5, 2)   // the executor: 40 ticks, 7 of children gone
	writeStat(t, root, 101, 100, 50, 20, 0, 0) // a render worker
	writeStat(t, root, 102, 101, 3, 1, 0, 0)   // something a worker runs
	writeStat(t, root, 200, 1, 900, 900, 0, 0) // another process
	writeStat(t, root, 201, 200, 900, 900, 0, 0)
	if err := os.MkdirAll(filepath.Join(root, "self"), 0o755); err != nil { // not a pid
		t.Fatal(err)
	}
	if got, want := treeCPU(root, 100), (40+7+70+4)*clockTick; got != want {
		t.Errorf("treeCPU = %s, want %s (executor 40, waited-for children 7, worker 70, its child 4 ticks)", got, want)
	}
	if got := treeCPU(root, 999); got != 0 {
		t.Errorf("treeCPU of a process that is gone = %s, want 0", got)
	}
	st, ok := readStat(root, 101)
	if !ok || st.ppid != 100 || st.self != 70*clockTick {
		t.Errorf("readStat = %+v %v, want ppid 100 and 70 ticks", st, ok)
	}
}

// The executor section and the big cluster run each function with the GC settings of its
// container in config/knative: GOMEMLIMIT always, GOGC where the manifest sets it.
func TestKnativeGCEnvReadsTheManifests(t *testing.T) {
	t.Chdir(filepath.Join("..", ".."))
	for _, fn := range []string{"submit", "executor", "notifier"} {
		env, err := knativeGCEnv(fn)
		if err != nil {
			t.Fatal(err)
		}
		if len(env) == 0 || !strings.HasPrefix(env[0], "GOMEMLIMIT=") || strings.ContainsAny(env[0], `" `) {
			t.Errorf("%s: env %q, want GOMEMLIMIT=<value> first", fn, env)
		}
	}
	if _, err := knativeGCEnv("nothing"); err == nil {
		t.Error("a function without a manifest: no error")
	}
}
