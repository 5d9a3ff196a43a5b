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
	return followGone(ctx, o.Globals, c, ns, o.Name)
}

// followGone polls the release until it is gone (uninstalled) or no longer pending (the
// uninstall failed).
func followGone(ctx context.Context, g *Globals, c *submitclient.Client, ns, name string) error {
	start := g.Now()
	last := ""
	for {
		rel, err := c.Get(ctx, ns, name)
		elapsed := g.Now().Sub(start).Round(time.Second)
		var apiErr *submitclient.APIError
		if errors.As(err, &apiErr) && apiErr.Status == http.StatusNotFound {
			fmt.Fprintf(g.IO.Out, "%s: uninstalled (%s)\n", name, elapsed)
			return nil
		}
		if err != nil {
			return err
		}
		st := statusOf(rel)
		if !release.IsPending(st) {
			fmt.Fprintf(g.IO.Out, "%s: %s, revision %d (%s)\n", name, st, rel.Version, elapsed)
			return fmt.Errorf("%w: uninstall of %s: revision %d is %s: %s", ErrFailed, name, rel.Version, st, rel.Info.Description)
		}
		if st != last {
			fmt.Fprintf(g.IO.Out, "%s: %s, revision %d (%s)\n", name, st, rel.Version, elapsed)
			last = st
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(g.PollInterval):
		}
	}
}
