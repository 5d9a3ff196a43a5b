package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/async-helm/async-helm/pkg/signing"
)

// Every function that signs or verifies events refuses to start with a key others could
// know: none, one too short to resist a search, or the placeholder once shipped.
func TestFunctionsRefuseToStartWithoutAStrongSigningKey(t *testing.T) {
	t.Parallel()
	for _, fn := range []string{"submit", "executor", "notifier"} {
		for _, key := range []string{"", "e2e-signing-key", signing.PlaceholderKey} {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			cmd := exec.CommandContext(ctx, bins[fn])
			cmd.Env = append(os.Environ(), "KUBECONFIG="+cluster.Kubeconfig, "K_SINK=http://127.0.0.1:9", "PORT=0",
				"EVENT_SIGNING_KEY="+key)
			out, err := cmd.CombinedOutput()
			timedOut := ctx.Err() != nil
			cancel()
			if timedOut {
				t.Errorf("%s with key %q: still running after 10 s, want a refusal to start", fn, key)
				continue
			}
			if err == nil || !strings.Contains(string(out), "EVENT_SIGNING_KEY") {
				t.Errorf("%s with key %q: %v\n%s\nwant exit non-zero naming EVENT_SIGNING_KEY", fn, key, err, out)
			}
		}
	}
}
