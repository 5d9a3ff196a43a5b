package eventing

import (
	"fmt"
	"net"
	"testing"
)

// The functions' ports lie below the ephemeral range, so a test's ":0" listener cannot take
// one between its pick and the function's bind; the three are distinct and bindable.
func TestFreeFunctionsPicksDistinctPortsBelowTheEphemeralRange(t *testing.T) {
	for i := 0; i < 50; i++ {
		f, err := FreeFunctions()
		if err != nil {
			t.Fatal(err)
		}
		seen := map[int]bool{}
		for _, p := range []int{f.Submit, f.Executor, f.Notifier} {
			if p < 20000 || p >= 32768 || seen[p] {
				t.Fatalf("ports %+v: want three distinct ports in 20000-32767", f)
			}
			seen[p] = true
			l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
			if err != nil {
				t.Fatalf("port %d is not free: %v", p, err)
			}
			l.Close()
		}
	}
}
