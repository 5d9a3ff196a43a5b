package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/async-helm/async-helm/pkg/api"
)

// RollbackOptions are rollback's.
type RollbackOptions struct {
	*Globals
	Name        string
	Revision    int
	Timeout     time.Duration
	Wait        bool
	WaitForJobs bool
	Description string
	Output      string
	Supersede   bool
}

func newRollbackCmd(g *Globals) *cobra.Command {
	o := &RollbackOptions{Globals: g}
	cmd := &cobra.Command{
		Use:   "rollback NAME [REVISION]",
		Short: "Roll a release back to REVISION (default: the previous one); answers at once with the pending revision",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if len(args) == 2 {
				v, err := strconv.Atoi(args[1])
				if err != nil || v < 1 {
					return fmt.Errorf("REVISION %q: want a revision number", args[1])
				}
				o.Revision = v
			}
			return o.Run(cmd.Context())
		},
	}
	f := cmd.Flags()
	f.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "time to wait for any individual Kubernetes operation (like Jobs for hooks)")
	f.BoolVar(&o.Wait, "wait", false, "follow the release until it is deployed or failed (exit 1 on failed)")
	f.BoolVar(&o.WaitForJobs, "wait-for-jobs", false, "have the rollback wait until all Jobs complete")
	f.StringVar(&o.Description, "description", "", "add a custom description")
	f.StringVarP(&o.Output, "output", "o", "table", "output format: table, json or yaml")
	f.BoolVar(&o.Supersede, "supersede", false, supersedeUsage)
	return cmd
}

// Run asks for the rollback, prints the pending revision, and with --wait follows it.
func (o *RollbackOptions) Run(ctx context.Context) error {
	if err := checkOutput(o.Output); err != nil {
		return err
	}
	c, err := o.client(ctx)
	if err != nil {
		return err
	}
	req := api.RollbackRequest{Name: o.Name, Namespace: o.namespace(), Version: o.Revision,
		Timeout: o.Timeout.String(), Wait: o.Wait, WaitForJobs: o.WaitForJobs, Description: o.Description,
		Supersede: o.Supersede}
	sec, err := c.Rollback(ctx, req)
	if err != nil {
		return err
	}
	if err := printAccepted(o.IO.Out, o.Output, sec); err != nil {
		return err
	}
	if !o.Wait {
		return nil
	}
	return o.track(target{ns: req.Namespace, submit: c}, req.Name).toEnd(ctx)
}
