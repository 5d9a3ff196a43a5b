package main

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/async-helm/async-helm/pkg/actionlog"
	"github.com/async-helm/async-helm/pkg/api"
)

// GET /api/helm/release/log: 403 for a caller who may not read the release (before
// anything is read: the same answer whether a log exists), 404 when none exists, the log
// to a reader, the lines after a sequence number, 400 for a bad version.
func TestActionLogRoute(t *testing.T) {
	own := cluster.Namespace(t) // async-helm's own namespace for this test
	s := newStackWith(t, func(c *Config) { c.Namespace = own })
	if cluster.Dev.BearerToken == "" {
		t.Skip("the kubeconfig has no dev token (not the local cluster)")
	}
	ns := cluster.Namespace(t)
	store := &actionlog.Store{Client: cluster.Client, Namespace: own}
	buf := actionlog.NewBuffer(0, nil)
	for _, l := range []string{"creating 1 resource(s)", "beginning wait for 1 resources with timeout of 10s", "Error: boom"} {
		buf.Append(l)
	}
	w := actionlog.NewWriter(store, buf, actionlog.Record{Namespace: ns, Name: "web", Revision: 1, RequestID: "r1", Action: "install"}, nil)
	if err := w.Flush(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	path := api.PathLog + "?ns=" + ns + "&name=web"
	var got api.ActionLog
	if code, _ := s.call(t, http.MethodGet, path, nil, &got); code != http.StatusOK || len(got.Lines) != 3 || got.Running || got.Revision != 1 {
		t.Fatalf("operator reads the latest log: %d %+v", code, got)
	}
	got = api.ActionLog{}
	if code, _ := s.call(t, http.MethodGet, path+"&version=1&after=2", nil, &got); code != http.StatusOK || len(got.Lines) != 1 || got.Lines[0].Text != "Error: boom" {
		t.Fatalf("after 2: %d %+v", code, got)
	}
	for q, want := range map[string]int{"&version=2": http.StatusNotFound, "&version=x": http.StatusBadRequest, "&after=-1": http.StatusBadRequest} {
		if code, _ := s.call(t, http.MethodGet, path+q, nil, nil); code != want {
			t.Errorf("%s: %d, want %d", q, code, want)
		}
	}
	if code, _ := s.call(t, http.MethodGet, strings.Replace(path, "name=web", "name=none", 1), nil, nil); code != http.StatusNotFound {
		t.Errorf("no log: %d, want 404", code)
	}
	s.token = cluster.Dev.BearerToken
	var e api.Error
	if code, _ := s.call(t, http.MethodGet, path, nil, &e); code != http.StatusForbidden {
		t.Errorf("dev, who may not read %s: %d %q, want 403", ns, code, e.Error)
	}
	if code, _ := s.call(t, http.MethodGet, strings.Replace(path, "name=web", "name=none", 1), nil, nil); code != http.StatusForbidden {
		t.Errorf("dev, a release without a log: %d, want 403 (not 404: nothing is told)", code)
	}
	grant(t, ns, "edit")
	cluster.WaitDevAllowed(t, ns, "list", "secrets", "")
	got = api.ActionLog{}
	if code, _ := s.call(t, http.MethodGet, path, nil, &got); code != http.StatusOK || len(got.Lines) != 3 {
		t.Errorf("dev, who may read %s now: %d %+v", ns, code, got)
	}
}
