package cli

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// HistoryOptions are history's flags and what Complete derives from them.
type HistoryOptions struct {
	genericiooptions.IOStreams
	*Globals
	Name   string
	Output string
	// Max is helm's --max: at most this many revisions, the newest.
	Max int

	target
}

// NewHistoryOptions are history's defaults on the shared flags g.
func NewHistoryOptions(g *Globals) *HistoryOptions {
	return &HistoryOptions{IOStreams: g.IO, Globals: g, Output: "table", Max: 256}
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

// Complete takes the release name and finds the namespace and submit.
func (o *HistoryOptions) Complete(cmd *cobra.Command, args []string) (err error) {
	o.Name = args[0]
	o.target, err = o.findTarget()
	return err
}

// Validate checks the name and the output format.
func (o *HistoryOptions) Validate() error {
	if err := requireName(o.Name); err != nil {
		return err
	}
	if err := checkOutput(o.Output); err != nil {
		return err
	}
	return o.validateSubmit()
}

// Run prints every revision of the release.
func (o *HistoryOptions) Run(ctx context.Context) error {
	if err := o.connect(ctx); err != nil {
		return err
	}
	rels, err := o.submit.History(ctx, o.ns, o.Name)
	if err != nil {
		return err
	}
	return printHistory(o.Out, o.Output, rels, o.Max)
}
