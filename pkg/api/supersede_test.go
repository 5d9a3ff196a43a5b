package api

import (
	"encoding/json"
	"errors"
	"testing"
)

func TestSupersedeOnlyOnUpgradesAndRollbacks(t *testing.T) {
	var req ReleaseRequest
	if err := json.Unmarshal([]byte(`{"name":"web","namespace":"team","chart_url":"https://charts.example/web-1.0.0.tgz","supersede":true}`), &req); err != nil {
		t.Fatal(err)
	}
	if !req.Supersede {
		t.Fatal("supersede was not decoded")
	}
	if err := req.Validate(true); !errors.Is(err, ErrSupersedeInstall) {
		t.Errorf("install with supersede: %v, want %v", err, ErrSupersedeInstall)
	}
	if err := req.Validate(false); err != nil {
		t.Errorf("upgrade with supersede: %v", err)
	}
	var rb RollbackRequest
	if err := json.Unmarshal([]byte(`{"name":"web","namespace":"team","version":2,"supersede":true}`), &rb); err != nil || !rb.Supersede {
		t.Fatalf("rollback body: %v, supersede %v", err, rb.Supersede)
	}
	if err := rb.Validate(); err != nil {
		t.Errorf("rollback with supersede: %v", err)
	}
	out, _ := json.Marshal(ReleaseRequest{Name: "web", Namespace: "team"})
	if string(out) != `{"name":"web","namespace":"team"}` {
		t.Errorf("a request without supersede encodes as %s", out)
	}
}
