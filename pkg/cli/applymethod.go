package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/async-helm/async-helm/pkg/api"
)

// ApplyFlags are --server-side and --force-conflicts, as Helm v4's CLI names them: the
// apply method of install, upgrade and rollback under the executor's Helm v4 engine
// (server_side and force_conflicts, docs/api.md).
type ApplyFlags struct {
	// ServerSide is "true", "false", "auto" or "" (the API's default: client-side).
	ServerSide     string
	ForceConflicts bool
}

func (a *ApplyFlags) addApplyFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&a.ServerSide, "server-side", a.ServerSide, `apply server-side under the executor's Helm v4 engine: true, false or auto (as the release being replaced); --server-side alone is true; default client-side, as the console`)
	f.Lookup("server-side").NoOptDefVal = string(api.ServerSideTrue)
	f.BoolVar(&a.ForceConflicts, "force-conflicts", a.ForceConflicts, "with server-side apply, take over fields another field manager owns")
}

// validateApply refuses a --server-side value submit would refuse.
func (a ApplyFlags) validateApply() error {
	switch api.ServerSide(a.ServerSide) {
	case api.ServerSideDefault, api.ServerSideTrue, api.ServerSideFalse, api.ServerSideAuto:
		return nil
	}
	return fmt.Errorf("--server-side %q: want true, false or auto", a.ServerSide)
}
