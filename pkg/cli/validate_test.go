package cli

import (
	"testing"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/submitclient"
)

// Validate refuses bad input with a clear message, on its own: no Globals, no client, no
// call (the options here have neither).
func TestValidate(t *testing.T) {
	overHTTP := target{submit: &submitclient.Client{Server: "http://submit.example.com", Token: "secret"}}
	refused := "refusing to send your token over plain http to submit.example.com: use an https URL (--server), or --insecure-send-token-over-http if the network to it is trusted"
	install := func(o ActionOptions) *ActionOptions {
		o.action, o.Name, o.Chart, o.Output = release.ActionInstall, "web", "https://x/c.tgz", "table"
		return &o
	}
	for _, tc := range []struct {
		name string
		o    options
		want string
	}{
		{"list", &ListOptions{Output: "table"}, ""},
		{"list, token over http", &ListOptions{Output: "json", named: named{target: overHTTP}}, refused},
		{"list, token over http allowed", &ListOptions{Output: "json", named: named{target: target{submit: overHTTP.submit, insecureHTTP: true}}}, ""},
		{"list, submit to find in the cluster", &ListOptions{Output: "json", named: named{target: target{submit: &submitclient.Client{Token: "t"}}}}, ""},
		{"list --filter (", &ListOptions{Output: "table", Query: listQuery{Filter: "("}}, "error parsing regexp: missing closing ): `(`"},
		{"list --offset -1", &ListOptions{Output: "table", Query: listQuery{Offset: -1}}, "--offset -1: want 0 or more"},
		{"get all --template", &GetOptions{named: named{Name: "web"}, Output: "table", Template: "{{.Release.Name}}"}, ""},
		{"get all, bad --template", &GetOptions{named: named{Name: "web"}, Output: "table", Template: "{{.Release"}, "template: _:1: unclosed action"},
		{"status --watch --revision", &StatusOptions{named: named{Name: "web"}, Output: "table", Watch: true, Revision: 2}, "--watch follows the latest revision: it takes no --revision"},
		{"template", &TemplateOptions{ActionOptions: &ActionOptions{named: named{Name: "release-name"}, Chart: "https://x/c.tgz"}}, ""},
		{"status", &StatusOptions{named: named{Name: "web"}, Output: "yaml"}, ""},
		{"status, no name", &StatusOptions{Output: "table"}, "NAME is required"},
		{"history", &HistoryOptions{named: named{Name: "web"}, Output: "json"}, ""},
		{"history, no name", &HistoryOptions{Output: "table"}, "NAME is required"},
		{"history, token over http", &HistoryOptions{named: named{Name: "web", target: overHTTP}, Output: "table"}, refused},
		{"cancel", &CancelOptions{named: named{Name: "web"}, Output: "table"}, ""},
		{"cancel, no name", &CancelOptions{Output: "table"}, "NAME is required"},
		{"uninstall", &UninstallOptions{named: named{Name: "web"}, Version: 2}, ""},
		{"uninstall, no name", &UninstallOptions{}, "NAME is required"},
		{"uninstall --version -1", &UninstallOptions{named: named{Name: "web"}, Version: -1}, "--version -1: want a revision number"},
		{"uninstall, token over http", &UninstallOptions{named: named{Name: "web", target: overHTTP}}, refused},
		{"rollback to the previous", &RollbackOptions{named: named{Name: "web"}, Output: "table"}, ""},
		{"rollback, no name", &RollbackOptions{Revision: 1, Output: "table"}, "NAME is required"},
		{"rollback to -1", &RollbackOptions{named: named{Name: "web"}, Revision: -1, Output: "table"}, "invalid release revision"},
		{"logs", &LogsOptions{named: named{Name: "web"}, Revision: 2, Follow: true, Output: "table"}, ""},
		{"logs, no name", &LogsOptions{Output: "table"}, "NAME is required"},
		{"logs --revision -1", &LogsOptions{named: named{Name: "web"}, Revision: -1, Output: "table"}, "--revision -1: want a revision number"},
		{"logs -f -o json", &LogsOptions{named: named{Name: "web"}, Follow: true, Output: "json"}, "--follow prints plain lines: it takes no -o json"},
		{"install", install(ActionOptions{Retries: 10, Remediation: "uninstall"}), ""},
		{"install, no chart", &ActionOptions{action: release.ActionInstall, named: named{Name: "web"}, Output: "table"}, "CHART is required"},
		{"upgrade, no chart", &ActionOptions{action: release.ActionUpgrade, named: named{Name: "web"}, Output: "table"}, ""},
		{"upgrade, no name", &ActionOptions{action: release.ActionUpgrade, Output: "table"}, "NAME is required"},
		{"install --retries 11", install(ActionOptions{Retries: 11}), "--retries 11: want 0 to 10"},
		{"install --retries -1", install(ActionOptions{Retries: -1}), "--retries -1: want 0 to 10"},
		{"install --remediation", install(ActionOptions{Remediation: "retry"}), `--remediation "retry": want rollback, uninstall or none`},
		{"install, token over http", install(ActionOptions{named: named{target: overHTTP}}), refused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.o.Validate()
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Validate() = %q, want %q", got, tc.want)
			}
		})
	}
}

// REVISION is a number (0: the previous revision, as helm's): Complete refuses anything
// else in helm's words before it looks for submit.
func TestRollbackCompleteRefusesABadRevision(t *testing.T) {
	for _, arg := range []string{"x", "1.5", ""} {
		o := &RollbackOptions{named: newNamed(&Globals{})}
		err := o.Complete(nil, []string{"web", arg})
		if want := `could not convert revision to a number: strconv.Atoi: parsing "` + arg + `": invalid syntax`; err == nil || err.Error() != want {
			t.Errorf("rollback web %s: %v, want %q", arg, err, want)
		}
	}
}
