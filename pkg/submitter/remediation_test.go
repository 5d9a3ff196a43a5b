package submitter

import (
	"errors"
	"testing"

	"github.com/async-helm/async-helm/pkg/auth"
	"github.com/async-helm/async-helm/pkg/events"
	"github.com/async-helm/async-helm/pkg/release"
)

// Retries and remediation go into the signed event; bad ones are refused before anything
// is reserved (docs/design.md, "Retries and remediation").
func TestSubmitCarriesRetriesAndRemediation(t *testing.T) {
	e := newEnv(t)
	req := install("web")
	req.Retries, req.Remediation = 3, "uninstall"
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, req, &auth.User{Name: "alice"}); err != nil {
		t.Fatal(err)
	}
	a, err := events.ParseAccepted(e.sender.sent[0])
	if err != nil || a.Options.Retries != 3 || a.Options.Remediation != "uninstall" {
		t.Fatalf("options %+v, %v", a.Options, err)
	}
	bad := install("db")
	bad.Retries, bad.Atomic = 1, true
	if _, err := e.svc.Submit(ctx(t), release.ActionInstall, bad, &auth.User{Name: "alice"}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("atomic with retries: %v, want ErrInvalid", err)
	}
	if n := len(e.secrets()); n != 1 {
		t.Errorf("%d release secrets, want only web's", n)
	}
}
