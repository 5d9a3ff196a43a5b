package testcluster

import (
	"flag"
	"fmt"
	"strconv"
)

// WaitBoundParallel raises how many parallel tests of the calling package run at once to
// n, unless -parallel was given on the command line. Call it from TestMain. go test's
// default is GOMAXPROCS (2 on CI), sized for tests that compute; packages whose parallel
// tests mostly wait on the cluster (pods that turn Ready after a profile's delay, Helm's
// --wait) leave the cores idle at that bound while the waits run one after the other.
func WaitBoundParallel(n int) error {
	if !flag.Parsed() {
		flag.Parse()
	}
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if set {
		return nil
	}
	if err := flag.Set("test.parallel", strconv.Itoa(n)); err != nil {
		return fmt.Errorf("set -test.parallel=%d: %w", n, err)
	}
	return nil
}
