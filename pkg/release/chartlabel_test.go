package release

import "testing"

func TestParseChartLabel(t *testing.T) {
	cases := []struct {
		label, name, version string
		ok                   bool
	}{
		{"tiny-0.1.0", "tiny", "0.1.0", true},
		{"tiny-1.0.0-rc.1", "tiny", "1.0.0-rc.1", true},
		{"tiny-1.0.0-rc-1", "tiny", "1.0.0-rc-1", true},
		{"tiny-1.0.0_build.7", "tiny", "1.0.0+build.7", true},
		{"tiny-1.0.0-alpha.1_sha.5114f85", "tiny", "1.0.0-alpha.1+sha.5114f85", true},
		{"cert-manager-v1.2.3", "cert-manager", "v1.2.3", true},
		{"app-2-1.0.0", "app-2", "1.0.0", true},
		{"gitlab-6.5.4", "gitlab", "6.5.4", true},
		{"tiny", "", "", false},
		{"tiny-rc.1", "", "", false},
		{"-1.0.0", "", "", false},
		{"", "", "", false},
	}
	for _, c := range cases {
		name, version, ok := ParseChartLabel(c.label)
		if name != c.name || version != c.version || ok != c.ok {
			t.Errorf("ParseChartLabel(%q) = %q, %q, %v; want %q, %q, %v", c.label, name, version, ok, c.name, c.version, c.ok)
		}
	}
}

func TestChartLabelRoundTrips(t *testing.T) {
	for _, c := range [][2]string{{"tiny", "1.0.0-rc.1"}, {"tiny", "1.0.0+build.7"}, {"cert-manager", "v1.2.3"}, {"app-2", "1.0.0"}} {
		l := ChartLabel(c[0], c[1])
		if l == "" {
			t.Fatalf("ChartLabel(%q, %q) is empty", c[0], c[1])
		}
		name, version, ok := ParseChartLabel(l)
		if !ok || name != c[0] || version != c[1] {
			t.Errorf("%q -> %q -> %q %q %v", c, l, name, version, ok)
		}
	}
}
