package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/submitclient"
	"github.com/async-helm/async-helm/pkg/wallclock"
)

// UninstallOptions are uninstall's flags and what Complete derives from them.
type UninstallOptions struct {
	named
	// Version, when set, must name an existing revision (the console's check).
	Version int
	Wait    bool
	// NoHooks runs none of the release's delete hooks (helm uninstall --no-hooks).
	NoHooks bool
}

// NewCmdUninstall is `uninstall NAME`.
func NewCmdUninstall(g *Globals) *cobra.Command {
	o := &UninstallOptions{named: newNamed(g)}
	cmd := &cobra.Command{
		Use:   "uninstall NAME",
		Short: "Uninstall a release; answers at once, the release shows uninstalling until it is gone",
		Args:  rangeArgs(1, 1),
		RunE:  runE(o),
	}
	cmd.Flags().IntVar(&o.Version, "version", o.Version, "refuse unless the release has this revision")
	cmd.Flags().BoolVar(&o.Wait, "wait", o.Wait, "follow the release until it is gone (exit 1 if the uninstall failed)")
	cmd.Flags().BoolVar(&o.NoHooks, "no-hooks", o.NoHooks, "run none of the release's delete hooks")
	return cmd
}

// Validate checks the name and --version (0: no check; a negative one would be none either).
func (o *UninstallOptions) Validate() error {
	return o.check(refuseIf(o.Version < 0, "--version %d: want a revision number", o.Version))
}

// Run asks for the uninstall and with --wait follows it until the release is gone.
func (o *UninstallOptions) Run(ctx context.Context) error {
	if err := o.submit.Uninstall(ctx, o.ns, o.Name, o.Version, api.UninstallOptions{NoHooks: o.NoHooks}); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "release %q uninstall requested in %s: %s\n", o.Name, o.ns, release.StatusUninstalling)
	if !o.Wait {
		return nil
	}
	return o.track(o.target, o.Name).gone(ctx)
}

// gone polls the release until it is gone (uninstalled) or no longer pending (failed).
func (t tracker) gone(ctx context.Context) error {
	out := t.g.IO.Out
	start := wallclock.Or(t.g.Clock).Now()
	last := ""
	for {
		rel, err := t.c.Get(ctx, t.ns, t.name)
		elapsed := wallclock.Or(t.g.Clock).Now().Sub(start).Round(time.Second)
		var apiErr *submitclient.APIError
		if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
			fmt.Fprintf(out, "%s: uninstalled (%s)\n", t.name, elapsed)
			return nil
		}
		if err != nil {
			return err
		}
		st := statusOf(rel)
		if st != last || !release.IsPending(st) {
			fmt.Fprintf(out, "%s: %s, revision %d (%s)\n", t.name, st, rel.Version, elapsed)
			last = st
		}
		if !release.IsPending(st) {
			return fmt.Errorf("%w: uninstall of %s: revision %d is %s: %s", ErrFailed, t.name, rel.Version, st, rel.Info.Description)
		}
		if err := t.g.pause(ctx); err != nil {
			return err
		}
	}
}
