package release

import (
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/labels"
)

// secretPrefix starts the name of every Helm 3 release secret.
const secretPrefix = "sh.helm.release.v1."

// Label selectors of the contract: every reader of release secrets uses these, so the
// labels have one owner.
const (
	// SelectorReleaseSecrets selects every Helm release secret.
	SelectorReleaseSecrets = LabelOwner + "=" + OwnerHelm
	// SelectorPending selects the release secrets whose action is still running.
	SelectorPending = SelectorReleaseSecrets + "," + LabelStatus + " in (pending-install,pending-rollback,pending-upgrade,uninstalling)"
)

// SelectorRelease selects the release secrets of one release (every revision).
func SelectorRelease(name string) string {
	return labels.Set{LabelOwner: OwnerHelm, LabelName: name}.String()
}

// ParseSecretName is the inverse of SecretName: the release and revision a release secret's
// name stands for. ok is false for any other name. Release names may contain ".v" (they
// are DNS names), so the revision is what follows the last ".v".
func ParseSecretName(secret string) (release string, revision int, ok bool) {
	rest, found := strings.CutPrefix(secret, secretPrefix)
	if !found {
		return "", 0, false
	}
	i := strings.LastIndex(rest, ".v")
	if i <= 0 {
		return "", 0, false
	}
	rev, err := strconv.Atoi(rest[i+2:])
	if err != nil || rev < 1 || strconv.Itoa(rev) != rest[i+2:] {
		return "", 0, false
	}
	return rest[:i], rev, true
}

// LeaseName is the name of the heartbeat Lease of one revision, in the release namespace:
// the revision's secret name (docs/design.md, "Exactly once").
func LeaseName(release string, revision int) string { return SecretName(release, revision) }
