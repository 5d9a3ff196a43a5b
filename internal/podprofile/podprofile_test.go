package podprofile

import "testing"

func TestParseAndAnnotations(t *testing.T) {
	for _, tc := range []struct {
		in       string
		selector string
		wantErr  bool
	}{
		{in: "fast"},
		{in: "slow", selector: "async-helm.io/speed=slow"},
		{in: "gitlab", selector: "async-helm.io/speed=gitlab"},
		{in: "quick", wantErr: true},
		{in: "", wantErr: true},
	} {
		p, err := Parse(tc.in)
		if (err != nil) != tc.wantErr {
			t.Fatalf("Parse(%q): %v", tc.in, err)
		}
		if err != nil {
			continue
		}
		a := p.Annotations()
		if got := a["scheduler.alpha.kubernetes.io/node-selector"]; got != tc.selector {
			t.Errorf("%s: node selector %q, want %q", tc.in, got, tc.selector)
		}
		if tc.selector != "" && a["scheduler.alpha.kubernetes.io/defaultTolerations"] == "" {
			t.Errorf("%s: no toleration of the profile node's taint", tc.in)
		}
	}
}
