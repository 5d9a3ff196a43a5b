package actionlog

import (
	"strings"
	"testing"
)

func TestLogBuffer(t *testing.T) {
	b := NewBuffer(FailureLogBytes, nil)
	b.Log("one %d", 1)
	b.Log("two")
	b.Log("three %s", "3")
	if got := b.TailText(2); got != "two\nthree 3" {
		t.Errorf("tail %q", got)
	}
}

// Helm's debug log may carry a value or error of any length (a 1 MiB template error): the
// failure report's tail is bounded in bytes, each line cut, repeats counted.
func TestLogBufferIsBounded(t *testing.T) {
	b := NewBuffer(FailureLogBytes, nil)
	for range 300 {
		b.Log("error: %s", strings.Repeat("x", 1<<20))
	}
	if got := len(b.TailText(200)); got > FailureLogBytes {
		t.Errorf("tail of %d KiB", got>>10)
	}
	b.Log("waiting for %s", "a")
	b.Log("waiting for %s", "b")
	b.Log("waiting for %s", "a")
	if got := b.TailText(200); !strings.HasSuffix(got, "waiting for a (repeated 1 times)\nwaiting for b") {
		t.Errorf("tail ends %q", got[max(0, len(got)-80):])
	}
}
