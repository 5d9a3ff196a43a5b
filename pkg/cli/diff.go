package cli

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/diff"
	"github.com/async-helm/async-helm/pkg/release"
)

// ExitError ends oc-helm with Code and no message (diff's --detailed-exitcode).
type ExitError struct{ Code int }

func (e *ExitError) Error() string { return fmt.Sprintf("exit status %d", e.Code) }

// DiffOptions are `diff install|upgrade|rollback`'s: the action's flags and helm-diff's.
type DiffOptions struct {
	*ActionOptions
	Revision         int
	Context          int
	DetailedExitCode bool
	// IncludeCRDs compares the chart's crds/ too (helm-diff's --include-crds).
	IncludeCRDs bool
	Output      string
}

// NewCmdDiff is `diff install|upgrade|rollback`.
func NewCmdDiff(g *Globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "diff",
		Short: "Show what an install, upgrade or rollback would change, as helm-diff does; nothing is applied",
	}
	for _, sub := range []struct {
		action     release.Action
		use, short string
		args       cobra.PositionalArgs
	}{
		{release.ActionUpgrade, "upgrade NAME [CHART]", "Show what an upgrade would change; without CHART the release's chart", rangeArgs(1, 2)},
		{release.ActionInstall, "install NAME CHART", "Show what an install would create", rangeArgs(2, 2)},
		{release.ActionRollback, "rollback NAME [REVISION]", "Show what a rollback would change (default: to the previous revision)", rangeArgs(1, 2)},
	} {
		o := &DiffOptions{ActionOptions: NewActionOptions(g, sub.action), Context: -1, Output: "diff"}
		c := &cobra.Command{Use: sub.use, Short: sub.short, Args: sub.args, RunE: runE(o)}
		if sub.action != release.ActionRollback {
			o.addChartFlags(c)
			c.Flags().BoolVar(&o.IncludeCRDs, "include-crds", false, "include the chart's CRDs in the diffing")
		}
		if sub.action == release.ActionUpgrade {
			c.Flags().BoolVar(&o.ReuseValues, "reuse-values", false, "reuse the last release's values and values-from references, with this upgrade's over them")
		}
		c.Flags().IntVarP(&o.Context, "context", "C", o.Context, "output NUM lines of context around changes (-1: whole objects)")
		c.Flags().BoolVar(&o.DetailedExitCode, "detailed-exitcode", false, "exit 2 when there are changes, 0 when none")
		c.Flags().StringVarP(&o.Output, "output", "o", o.Output, "output format: diff (helm-diff's), json or yaml (helm-diff's JSON array, each change with its unified diff)")
		cmd.AddCommand(c)
	}
	return cmd
}

// Complete takes NAME and CHART (install, upgrade) or REVISION (rollback).
func (o *DiffOptions) Complete(cmd *cobra.Command, args []string) error {
	if o.action != release.ActionRollback {
		return o.ActionOptions.Complete(cmd, args)
	}
	if len(args) == 2 {
		v, err := strconv.Atoi(args[1])
		if err != nil || v < 1 {
			return fmt.Errorf("REVISION %q: want a revision number", args[1])
		}
		o.Revision = v
	}
	return o.named.Complete(cmd, args)
}

// Validate checks the name, the chart of an install and the output format.
func (o *DiffOptions) Validate() error {
	return o.check(refuseIf(o.action == release.ActionInstall && o.Chart == "", "CHART is required"),
		refuseIf(o.Output != "diff" && o.Output != "json" && o.Output != "yaml", "output format %q: want diff, json or yaml", o.Output))
}

// Run asks submit for the diff and prints it as helm-diff does (--context applied here).
func (o *DiffOptions) Run(ctx context.Context) error {
	url, entry := chartRef(o.Chart)
	lines := o.Context
	if o.Output == "diff" {
		lines = -1
	}
	req := api.DiffRequest{Action: string(o.action), Version: o.Revision, Context: &lines, IncludeCRDs: o.IncludeCRDs,
		ReleaseRequest: api.ReleaseRequest{Name: o.Name, Namespace: o.ns, ChartURL: url, IndexEntry: entry,
			ChartVersion: o.ActionOptions.Version, Values: o.vals, ValuesFrom: o.refs, ReuseValues: o.ReuseValues}}
	out, err := o.submit.Diff(ctx, req)
	if err != nil {
		return err
	}
	changes := out.Changes
	if changes == nil {
		changes = []diff.Change{} // helm-diff's "[]"
	}
	if o.Output != "diff" {
		err = encode(o.Out, o.Output, changes)
	} else {
		err = diff.WriteText(o.Out, changes, o.Context)
	}
	if err != nil {
		return err
	}
	if o.DetailedExitCode && len(out.Changes) > 0 {
		return &ExitError{Code: 2}
	}
	return nil
}
