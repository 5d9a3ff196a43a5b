package release

import (
	"fmt"
	"strings"
	"testing"

	"helm.sh/helm/v3/pkg/storage/driver"
)

// The console forwards Helm's own "release: not found", and clients decide on that text: the
// unmodified oc-helm's `upgrade --install` installs only when the release read's error
// contains it.
func TestErrNotFoundIsHelmsText(t *testing.T) {
	err := fmt.Errorf("%w: team/web", ErrNotFound)
	if !strings.Contains(err.Error(), driver.ErrReleaseNotFound.Error()) {
		t.Errorf("%q does not contain Helm's %q", err, driver.ErrReleaseNotFound)
	}
}
