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

// NewHistoryOptions are history's defaults on the shared flags g.
func NewHistoryOptions(g *Globals) *HistoryOptions {
	return &HistoryOptions{named: newNamed(g), Output: "table", Max: 256}
}

// NewCmdHistory is `history NAME`.
func NewCmdHistory(g *Globals) *cobra.Command {
	o := NewHistoryOptions(g)
	cmd := &cobra.Command{
		Use:     "history RELEASE_NAME",
		Aliases: []string{"hist"},
		Short:   "Show every revision of a release",
		Args:    exactArgs(1),
		RunE:    runE(o),
	}
	cmd.Flags().IntVar(&o.Max, "max", o.Max, "maximum number of revision to include in history")
	addOutputFlag(cmd.Flags(), &o.Output)
	return cmd
}

// Validate checks the name and the output format.
func (o *HistoryOptions) Validate() error {
	return firstError(requireName(o.Name), checkOutput(o.Output), o.validateSubmit())
}

// Run prints every revision of the release.
func (o *HistoryOptions) Run(ctx context.Context) error {
	rels, err := o.submit.History(ctx, o.ns, o.Name)
	if err != nil {
		return err
	}
	return printHistory(o.Out, o.Output, rels, o.Max)
}
