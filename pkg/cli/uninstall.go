package cli

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/submitclient"
)

// UninstallOptions are uninstall's.
type UninstallOptions struct {
	*Globals
	Name string
	// Version, when set, must name an existing revision (the console's check).
	Version int
	Wait    bool
}

func newUninstallCmd(g *Globals) *cobra.Command {
	o := &UninstallOptions{Globals: g}
	cmd := &cobra.Command{
		Use:   "uninstall NAME",
		Short: "Uninstall a release; answers at once, the release shows uninstalling until it is gone",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().IntVar(&o.Version, "version", 0, "refuse unless the release has this revision")
	cmd.Flags().BoolVar(&o.Wait, "wait", false, "follow the release until it is gone (exit 1 if the uninstall failed)")
	return cmd
}

// Run asks for the uninstall and with --wait follows it until the release is gone.
func (o *UninstallOptions) Run(ctx context.Context) error {
	c, err := o.client(ctx)
	if err != nil {
		return err
	}
	ns := o.namespace()
	if err := c.Uninstall(ctx, ns, o.Name, o.Version); err != nil {
		return err
	}
	fmt.Fprintf(o.IO.Out, "release %q uninstall requested in %s: %s\n", o.Name, ns, release.StatusUninstalling)
	if !o.Wait {
		return nil
	}
	return o.track(target{ns: ns, submit: c}, o.Name).gone(ctx)
}

// gone polls the release until it is gone (uninstalled) or no longer pending (the
// uninstall failed).
func (t tracker) gone(ctx context.Context) error {
	out := t.g.IO.Out
	start := t.g.Now()
	last := ""
	for {
		rel, err := t.c.Get(ctx, t.ns, t.name)
		elapsed := t.g.Now().Sub(start).Round(time.Second)
		var apiErr *submitclient.APIError
		if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
			fmt.Fprintf(out, "%s: uninstalled (%s)\n", t.name, elapsed)
			return nil
		}
		if err != nil {
			return err
		}
		st := statusOf(rel)
		if !release.IsPending(st) {
			fmt.Fprintf(out, "%s: %s, revision %d (%s)\n", t.name, st, rel.Version, elapsed)
			return fmt.Errorf("%w: uninstall of %s: revision %d is %s: %s", ErrFailed, t.name, rel.Version, st, rel.Info.Description)
		}
		if st != last {
			fmt.Fprintf(out, "%s: %s, revision %d (%s)\n", t.name, st, rel.Version, elapsed)
			last = st
		}
		if err := t.g.pause(ctx); err != nil {
			return err
		}
	}
}
