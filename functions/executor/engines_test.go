package main

import (
	"os"
	"testing"

	"github.com/async-helm/async-helm/pkg/helmexec"
)

// The executor's cluster tests run on both engines (docs/design.md, "Two engines"): the
// tests of what an action does run once per engine as subtests (engines), side by side;
// the rest, and the slow waits, on the default engine. ASYNC_HELM_TEST_ENGINE=v4 runs every
// test of the package on the v4 engine (a developer's whole check, not CI's).

// testEngines are the engines an engines test runs on.
var testEngines = []helmexec.Engine{helmexec.EngineV3, helmexec.EngineV4}

func defaultTestEngine() string {
	return os.Getenv("ASYNC_HELM_TEST_ENGINE")
}

// engines runs fn once per engine, in parallel subtests named after the engine.
func engines(t *testing.T, fn func(t *testing.T, engine helmexec.Engine)) {
	t.Helper()
	for _, e := range testEngines {
		t.Run(string(e), func(t *testing.T) {
			t.Parallel()
			fn(t, e)
		})
	}
}
