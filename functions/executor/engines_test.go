package main

import (
	"os"
	"testing"

	"github.com/async-helm/async-helm/pkg/helmexec"
)

// The executor's cluster tests run on both engines (docs/design.md, "Two engines") in one
// test binary: a test whose outcome depends on what the engine does (a Helm action, its
// wait, its end by a cancel, a deadline, a lost lease or a shutdown, its records) runs once
// per engine through engines, the two side by side; a test of what the executor decides
// before or around Helm (events, signatures, replays, leases, redeliveries, slots) runs
// once, on the default engine, and so do the slow waits (the interop matrices, the long
// waits of shares_test.go). ASYNC_HELM_TEST_ENGINE=v3|v4 runs every test on that engine
// only (a developer's check of one engine; the v4 run's cost is the difference).

// testEngines are the engines an engines test runs on.
func testEngines() []helmexec.Engine {
	if e := defaultTestEngine(); e != "" {
		return []helmexec.Engine{helmexec.Engine(e)}
	}
	return []helmexec.Engine{helmexec.EngineV3, helmexec.EngineV4}
}

func defaultTestEngine() string {
	return os.Getenv("ASYNC_HELM_TEST_ENGINE")
}

// engines runs fn once per engine, in parallel subtests named after the engine.
func engines(t *testing.T, fn func(t *testing.T, engine helmexec.Engine)) {
	t.Helper()
	for _, e := range testEngines() {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			fn(t, e)
		})
	}
}
