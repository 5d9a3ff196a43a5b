package release

import (
	"regexp"
	"strings"
)

// semVer is Semantic Versioning 2.0.0 (semver.org's own expression), with the leading "v"
// Helm accepts.
var semVer = regexp.MustCompile(`^v?(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)` +
	`(?:-((?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\.(?:0|[1-9]\d*|\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?` +
	`(?:\+([0-9a-zA-Z-]+(?:\.[0-9a-zA-Z-]+)*))?$`)

// ParseChartLabel splits a LabelChart value ("<chart>-<version>") into the chart's name and
// version. Chart names and prerelease versions both contain "-", so the split is at the
// first "-" after which a whole semantic version follows: "tiny-1.0.0-rc.1" is tiny
// 1.0.0-rc.1, "cert-manager-v1.2.3" is cert-manager v1.2.3. Build metadata comes back with
// its "+" ("tiny-1.0.0_b.7" is tiny 1.0.0+b.7, see ChartLabel). ok is false when no split
// gives a version.
func ParseChartLabel(label string) (name, version string, ok bool) {
	for i := 1; i < len(label)-1; i++ {
		if label[i] != '-' {
			continue
		}
		v := strings.ReplaceAll(label[i+1:], "_", "+")
		if semVer.MatchString(v) {
			return label[:i], v, true
		}
	}
	return "", "", false
}
