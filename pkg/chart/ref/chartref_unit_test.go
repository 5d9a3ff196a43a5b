package ref

import (
	"errors"
	"testing"
)

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		ref Ref
		ok  bool
	}{
		{Ref{URL: "https://charts.example/tiny-1.0.0.tgz"}, true},
		{Ref{URL: "http://charts.example/tiny-1.0.0.tgz"}, true},
		{Ref{URL: "oci://registry.example/charts/tiny", Version: "1.0.0"}, true},
		{Ref{URL: "file:///etc/passwd"}, false},
		{Ref{URL: "gopher://charts.example/x"}, false},
		{Ref{URL: "https:///no-host.tgz"}, false},
		{Ref{URL: "://broken"}, false},
		{Ref{IndexEntry: "tiny--local"}, true},
		{Ref{IndexEntry: "cert-manager--jetstack", Version: "1.2.3"}, true},
		{Ref{IndexEntry: "tiny"}, false},
		{Ref{IndexEntry: "--local"}, false},
		{Ref{IndexEntry: "tiny--"}, false},
		{Ref{}, false},
	} {
		err := tc.ref.Validate()
		if (err == nil) != tc.ok {
			t.Errorf("Validate(%+v) = %v, want ok %v", tc.ref, err, tc.ok)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("Validate(%+v) = %v, not ErrInvalid", tc.ref, err)
		}
	}
}

func TestSplitIndexEntry(t *testing.T) {
	for _, tc := range []struct{ entry, chart, repo string }{
		{"tiny--local", "tiny", "local"},
		// The repository is after the last "--": chart names may hold "--".
		{"my--chart--repo", "my--chart", "repo"},
		{"a--b", "a", "b"},
	} {
		c, r, err := SplitIndexEntry(tc.entry)
		if err != nil || c != tc.chart || r != tc.repo {
			t.Errorf("SplitIndexEntry(%q) = %q, %q, %v", tc.entry, c, r, err)
		}
	}
}

func TestString(t *testing.T) {
	if s := (Ref{URL: "https://x/y.tgz", Version: "9"}).String(); s != "https://x/y.tgz" {
		t.Errorf("URL ref %q", s)
	}
	if s := (Ref{IndexEntry: "tiny--local", Version: "1.0.0"}).String(); s != "tiny--local@1.0.0" {
		t.Errorf("index ref %q", s)
	}
}
