package cli

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/async-helm/async-helm/pkg/api"
)

// RollbackOptions are rollback's flags and what Complete derives from them.
type RollbackOptions struct {
	named
	// Revision is REVISION, or 0 for the previous one.
	Revision    int
	Timeout     time.Duration
	Wait        bool
	WaitForJobs bool
	Description string
	Output      string
	Supersede   bool
	ApplyFlags
}

// NewCmdRollback is `rollback NAME [REVISION]`.
func NewCmdRollback(g *Globals) *cobra.Command {
	o := &RollbackOptions{named: newNamed(g), Timeout: 5 * time.Minute, Output: "table"}
	cmd := &cobra.Command{
		Use:   "rollback NAME [REVISION]",
		Short: "Roll a release back to REVISION (default: the previous one); answers at once with the pending revision",
		Args:  rangeArgs(1, 2),
		RunE:  runE(o),
	}
	f := cmd.Flags()
	f.DurationVar(&o.Timeout, "timeout", o.Timeout, "time to wait for any individual Kubernetes operation (like Jobs for hooks)")
	f.BoolVar(&o.Wait, "wait", o.Wait, "follow the release until it is deployed or failed (exit 1 on failed)")
	f.BoolVar(&o.WaitForJobs, "wait-for-jobs", o.WaitForJobs, "have the rollback wait until all Jobs complete")
	f.StringVar(&o.Description, "description", o.Description, "add a custom description")
	addOutputFlag(f, &o.Output)
	f.BoolVar(&o.Supersede, "supersede", o.Supersede, supersedeUsage)
	o.addApplyFlags(cmd)
	return cmd
}

// Complete takes NAME and REVISION (a revision number), then the namespace and submit.
func (o *RollbackOptions) Complete(cmd *cobra.Command, args []string) (err error) {
	if len(args) == 2 {
		if o.Revision, err = strconv.Atoi(args[1]); err != nil {
			return fmt.Errorf("could not convert revision to a number: %w", err)
		}
	}
	return o.named.Complete(cmd, args)
}

// Validate checks the name, the revision and the apply method.
func (o *RollbackOptions) Validate() error {
	// helm's words for a negative revision; 0 is the previous revision, as helm's.
	return o.check(refuseIf(o.Revision < 0, "invalid release revision"), o.validateApply())
}

// Run asks for the rollback, prints the pending revision, and with --wait follows it.
func (o *RollbackOptions) Run(ctx context.Context) error {
	req := api.RollbackRequest{Name: o.Name, Namespace: o.ns, Version: o.Revision,
		Timeout: o.Timeout.String(), Wait: o.Wait, WaitForJobs: o.WaitForJobs, Description: o.Description,
		Supersede: o.Supersede, ServerSide: api.ServerSide(o.ServerSide), ForceConflicts: o.ForceConflicts}
	sec, err := o.submit.Rollback(ctx, req)
	if err != nil {
		return err
	}
	if err := printAccepted(o.Out, o.Output, sec); err != nil {
		return err
	}
	if !o.Wait {
		return nil
	}
	return o.track(o.target, o.Name).toEnd(ctx)
}
