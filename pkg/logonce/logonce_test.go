package logonce

import (
	"fmt"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"
)

func TestWarnOncePerKeyWithinMaxKeys(t *testing.T) {
	core, logs := observer.New(zap.WarnLevel)
	log := zap.New(core).Sugar()
	var s Set
	s.Warn(log, "a", "first")
	s.Warn(log, "a", "again")
	if n := logs.Len(); n != 1 {
		t.Fatalf("%d warnings for one key, want 1", n)
	}
	for i := range MaxKeys {
		s.Warn(log, fmt.Sprint("k", i), "many")
	}
	if len(s.seen) > MaxKeys {
		t.Errorf("remembers %d keys, want at most %d", len(s.seen), MaxKeys)
	}
}
