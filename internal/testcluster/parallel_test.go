package testcluster

import (
	"flag"
	"testing"
)

// WaitBoundParallel sets -test.parallel only when the command line did not: the test
// binary here runs with go test's flags, so whichever way it was started, after the call
// the flag is n or what was given.
func TestWaitBoundParallel(t *testing.T) {
	f := flag.Lookup("test.parallel")
	given := false
	flag.Visit(func(v *flag.Flag) { given = given || v.Name == "test.parallel" })
	before := f.Value.String()
	if err := WaitBoundParallel(7); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = f.Value.Set(before) })
	want := "7"
	if given {
		want = before
	}
	if got := f.Value.String(); got != want {
		t.Errorf("-test.parallel = %s, want %s (given on the command line: %v)", got, want, given)
	}
	// Once set, a second call leaves it alone: the flag counts as given now.
	if err := WaitBoundParallel(9); err != nil {
		t.Fatal(err)
	}
	if got := f.Value.String(); got != want {
		t.Errorf("after a second call -test.parallel = %s, want %s", got, want)
	}
}
