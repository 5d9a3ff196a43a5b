package api

import (
	"net/url"
	"testing"
)

func TestParseUninstallQuery(t *testing.T) {
	for _, tc := range []struct {
		query   string
		noHooks bool
		bad     bool
	}{
		{"ns=a&name=b", false, false},
		{"no_hooks=true", true, false},
		{"no_hooks=1", true, false},
		{"no_hooks=false", false, false},
		{"no_hooks=", false, false},
		{"no_hooks=yes", false, true},
	} {
		q, _ := url.ParseQuery(tc.query)
		o, err := ParseUninstallQuery(q)
		if (err != nil) != tc.bad || o.NoHooks != tc.noHooks {
			t.Errorf("%q: %+v, %v", tc.query, o, err)
		}
		if err == nil {
			back := url.Values{}
			o.Query(back)
			if back.Get(QueryNoHooks) != map[bool]string{true: "true"}[tc.noHooks] {
				t.Errorf("%q: written back as %q", tc.query, back.Encode())
			}
		}
	}
}
