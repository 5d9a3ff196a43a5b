package cli

import (
	"context"

	"github.com/spf13/cobra"
)

// HistoryOptions are history's flags and what Complete derives from them.
type HistoryOptions struct {
	named
	Output string
	// Max is helm's --max: at most this many revisions, the newest.
	Max int
}

// NewCmdHistory is `history NAME`.
func NewCmdHistory(g *Globals) *cobra.Command {
	o := &HistoryOptions{named: newNamed(g), Output: "table", Max: 256}
	cmd := &cobra.Command{
		Use:     "history RELEASE_NAME",
		Aliases: []string{"hist"},
		Short:   "Show every revision of a release",
		Args:    rangeArgs(1, 1),
		RunE:    runE(o),
	}
	cmd.Flags().IntVar(&o.Max, "max", o.Max, "maximum number of revision to include in history")
	addOutputFlag(cmd.Flags(), &o.Output)
	return cmd
}

// Run prints every revision of the release.
func (o *HistoryOptions) Run(ctx context.Context) error {
	rels, err := o.submit.History(ctx, o.ns, o.Name)
	if err != nil {
		return err
	}
	return writeFormat(o.Out, o.Output, newHistory(rels, o.Max))
}
