package chaos

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The lines of a run seen in make chaos: executor-0 lost s97's Lease while waiting for a CPU
// slot and logged "action finished" (failed) after abandoning it; executor-2 ran it to
// deployed. That is one Helm run, not two.
func TestFinishedRunsLeaveOutAbandonedRuns(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, lines ...string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("executor-0.log",
		`{"message":"lease lost; cancelling the action","namespace":"ns","release":"s97","revision":1}`,
		`{"message":"action abandoned after losing the lease","namespace":"ns","release":"s97","revision":1,"error":"waiting for a CPU slot: context canceled"}`,
		`{"message":"action finished","namespace":"ns","release":"s97","revision":1,"outcome":"failed"}`,
		`{"message":"action finished","namespace":"ns","release":"s1","revision":1,"outcome":"deployed"}`,
		`{"message":"action finished","namespace":"other","release":"s2","revision":1,"outcome":"deployed"}`,
		`not json`)
	write("executor-2.log",
		`{"message":"action finished","namespace":"ns","release":"s97","revision":1,"outcome":"deployed"}`,
		`{"message":"action finished","namespace":"ns","release":"s1","revision":1,"outcome":"deployed"}`)
	write("notifier-0.log", `{"message":"action finished","namespace":"ns","release":"s3","revision":1}`)
	c, err := finishedRuns(dir, "ns")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"sh.helm.release.v1.s97.v1": 1, "sh.helm.release.v1.s1.v1": 2}
	if len(c.finished) != len(want) || c.finished["sh.helm.release.v1.s97.v1"] != 1 || c.finished["sh.helm.release.v1.s1.v1"] != 2 {
		t.Errorf("finished runs %v, want %v", c.finished, want)
	}
	if c.abandoned != 1 || c.early != 1 {
		t.Errorf("abandoned %d (early %d), want 1 (1)", c.abandoned, c.early)
	}
}

// An abandoned run whose Helm returned no error wrote its final record before the loss was
// seen (TestChaosShort on a starved machine: "s64 revision 1 is deployed with no Helm run
// logged"): it is the revision's run, and another executor's run after it is a second one.
func TestAbandonedRunWithoutErrorIsTheRevisionsRun(t *testing.T) {
	dir := t.TempDir()
	lines := `{"message":"action abandoned after losing the lease","namespace":"ns","release":"s64","revision":1,"error":null}
{"message":"action finished","namespace":"ns","release":"s64","revision":1,"outcome":"failed"}
{"message":"action abandoned after losing the lease","namespace":"ns","release":"s65","revision":1,"error":null}
`
	if err := os.WriteFile(filepath.Join(dir, "executor-1.log"), []byte(lines), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "executor-2.log"),
		[]byte(`{"message":"action finished","namespace":"ns","release":"s65","revision":1,"outcome":"deployed"}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := finishedRuns(dir, "ns")
	if err != nil {
		t.Fatal(err)
	}
	if c.finished["sh.helm.release.v1.s64.v1"] != 1 || c.finished["sh.helm.release.v1.s65.v1"] != 2 || c.abandoned != 2 {
		t.Errorf("finished %v, abandoned %d; want s64 once, s65 twice (Helm ran twice), 2 abandoned", c.finished, c.abandoned)
	}
}
