package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/async-helm/async-helm/pkg/api"
)

// A member of system:masters is refused with the reason: no RBAC rule limits that group, so
// the executor acting as it would hold unlimited rights. The same rights bound by RBAC (a
// ServiceAccount bound to cluster-admin) are accepted.
func TestSystemMastersCallersAreRefused(t *testing.T) {
	s := newStack(t)
	ns := cluster.Namespace(t)
	s.token = cluster.Admin.BearerToken // the local cluster's admin is in system:masters
	var e api.Error
	if code, _ := s.call(t, http.MethodPost, api.PathAsync, s.install("web", ns), &e); code != http.StatusForbidden ||
		!strings.Contains(e.Error, "system:masters") {
		t.Fatalf("install by a member of system:masters: %d %q, want 403 naming the group", code, e.Error)
	}
	if code, _ := s.call(t, http.MethodGet, api.PathList+"?ns="+ns, nil, nil); code != http.StatusForbidden {
		t.Errorf("list by a member of system:masters: %d, want 403", code)
	}
	if n := releaseSecrets(t, ns); n != 0 {
		t.Fatalf("%d release secrets after the refusal", n)
	}
	s.token = cluster.Operator.BearerToken
	if code, _ := s.call(t, http.MethodPost, api.PathAsync, s.install("web", ns), &e); code != http.StatusCreated {
		t.Fatalf("install by a cluster admin bound by RBAC: %d %q", code, e.Error)
	}
}
