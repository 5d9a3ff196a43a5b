package main

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"

	"github.com/async-helm/async-helm/pkg/api"
)

// An uninstall whose no_hooks is not a boolean is refused with 400 before anything is read.
func TestUninstallWithABadNoHooksIs400(t *testing.T) {
	f := &Function{log: zap.NewNop().Sugar()} // no service: nothing may be asked of it
	r := httptest.NewRequest(http.MethodDelete, api.PathAsync+"?ns=ns&name=web&no_hooks=maybe", nil)
	_, _, err := f.acceptUninstall(r)
	if got := statusOf(err); err == nil || got != http.StatusBadRequest {
		t.Errorf("answered %d (%v), want 400", got, err)
	}
}
