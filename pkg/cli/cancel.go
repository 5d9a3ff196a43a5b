package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/submitclient"
)

// CancelOptions are cancel's.
type CancelOptions struct {
	*Globals
	Name   string
	Wait   bool
	Output string
}

func newCancelCmd(g *Globals) *cobra.Command {
	o := &CancelOptions{Globals: g}
	cmd := &cobra.Command{
		Use:   "cancel NAME",
		Short: "Stop the pending install or upgrade of a release; it ends failed, \"cancelled by <you>\"",
		Long: "A revision an executor is running stops within seconds (rolled back where --atomic was asked);\n" +
			"one no executor has started yet is failed at once. Allowed to whoever may upgrade the release.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			return o.Run(cmd.Context())
		},
	}
	cmd.Flags().BoolVar(&o.Wait, "wait", false, "follow the revision until it is final (exit 1 if it ended other than failed: the cancel came too late)")
	cmd.Flags().StringVarP(&o.Output, "output", "o", "table", "output format: table, json or yaml")
	return cmd
}

// Run asks submit to cancel, prints what it answered, and with --wait follows the revision.
func (o *CancelOptions) Run(ctx context.Context) error {
	return o.with(ctx, o.Output, func(ctx context.Context, c *submitclient.Client) error {
		ns := o.namespace()
		out, err := c.Cancel(ctx, ns, o.Name)
		if err != nil {
			return err
		}
		if err := printCancelled(o, out); err != nil {
			return err
		}
		if !o.Wait || out.Status == string(helmrelease.StatusFailed) {
			return nil
		}
		rel, err := o.track(target{ns: ns, submit: c}, o.Name).follow(ctx)
		if err != nil {
			return err
		}
		if rel.Version != out.Revision || statusOf(rel) != string(helmrelease.StatusFailed) {
			// The action ended before the cancel reached it (or a new revision came).
			return fmt.Errorf("not cancelled: %s revision %d is %s", o.Name, rel.Version, statusOf(rel))
		}
		return nil
	})
}

func printCancelled(o *CancelOptions, c *api.Cancelled) error {
	if o.Output != "table" {
		return encode(o.IO.Out, o.Output, c)
	}
	what := c.Status
	if c.Status == string(helmrelease.StatusFailed) {
		what = "failed (not started)"
	}
	_, err := fmt.Fprintf(o.IO.Out, "%s: revision %d %s\n", c.Name, c.Revision, what)
	return err
}
