package cli

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/api"
)

// CancelOptions are cancel's flags and what Complete derives from them.
type CancelOptions struct {
	named
	Wait   bool
	Output string
}

// NewCmdCancel is `cancel NAME`.
func NewCmdCancel(g *Globals) *cobra.Command {
	o := &CancelOptions{named: newNamed(g), Output: "table"}
	cmd := &cobra.Command{
		Use:   "cancel NAME",
		Short: "Stop the pending install or upgrade of a release; it ends failed, \"cancelled by <you>\"",
		Long: "A revision an executor is running stops within seconds (rolled back where --atomic was asked);\n" +
			"one no executor has started yet is failed at once. Allowed to whoever may upgrade the release.",
		Args: rangeArgs(1, 1),
		RunE: runE(o),
	}
	cmd.Flags().BoolVar(&o.Wait, "wait", o.Wait, "follow the revision until it is final (exit 1 if it ended other than failed: the cancel came too late)")
	addOutputFlag(cmd.Flags(), &o.Output)
	return cmd
}

// Run asks submit to cancel, prints what it answered, and with --wait follows the revision.
func (o *CancelOptions) Run(ctx context.Context) error {
	out, err := o.submit.Cancel(ctx, o.ns, o.Name)
	if err != nil {
		return err
	}
	if err := printCancelled(o, out); err != nil {
		return err
	}
	if !o.Wait || out.Status == string(helmrelease.StatusFailed) {
		return nil
	}
	rel, err := o.track(o.target, o.Name).follow(ctx)
	if err != nil {
		return err
	}
	if rel.Version != out.Revision || statusOf(rel) != string(helmrelease.StatusFailed) {
		// The action ended before the cancel reached it (or a new revision came).
		return fmt.Errorf("not cancelled: %s revision %d is %s", o.Name, rel.Version, statusOf(rel))
	}
	return nil
}

func printCancelled(o *CancelOptions, c *api.Cancelled) error {
	if o.Output != "table" {
		return encode(o.Out, o.Output, c)
	}
	what := c.Status
	if c.Status == string(helmrelease.StatusFailed) {
		what = "failed (not started)"
	}
	_, err := fmt.Fprintf(o.Out, "%s: revision %d %s\n", c.Name, c.Revision, what)
	return err
}
