package actionlog

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/async-helm/async-helm/internal/fakekube"
)

// Attack: the buffer counts a line's text bytes, but the ConfigMap stores it as JSON, where
// '<', '>', '&' become \u003c (6 bytes) and so do control bytes and invalid UTF-8. An
// upgrade whose objects fail validation echoing a tenant's value ("error updating the
// resource ...: metadata.labels: Invalid value: \"<<<…\"", one line per object) fills the
// buffer with such text: the stored log outgrows a ConfigMap (1 MiB), every write fails, and
// the action's log is never written (nor its tail in the failed event).
func TestEscapedLinesStillFitInAConfigMap(t *testing.T) {
	clock := fakekube.NewClock(time.Date(2026, 12, 3, 23, 0, 0, 0, time.UTC))
	buf := NewBuffer(DefaultBytes, clock)
	for i := 0; i < 2000; i++ {
		buf.Log("error updating the resource %q:\n\t %v", "cm-"+strings.Repeat("x", i%50),
			errors.New(`ConfigMap "x" is invalid: metadata.labels: Invalid value: "`+strings.Repeat("<", 1000)+`"`))
	}
	lines, dropped, _ := buf.Snapshot()
	cm, err := encode("async-helm", &Record{Namespace: "ns", Name: "web", Revision: 2, Lines: lines, Dropped: dropped})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(cm.Data[dataKey]); n > maxStoredBytes {
		t.Errorf("a %d KiB buffer stored as %d KiB of JSON: over a ConfigMap's 1 MiB, the write fails", DefaultBytes>>10, n>>10)
	}
}
