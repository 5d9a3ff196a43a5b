package cli

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// StatusOptions are status's flags and what Complete derives from them.
type StatusOptions struct {
	genericiooptions.IOStreams
	*Globals
	Name   string
	Watch  bool
	Output string

	target
}

// NewStatusOptions are status's defaults on the shared flags g.
func NewStatusOptions(g *Globals) *StatusOptions {
	return &StatusOptions{IOStreams: g.IO, Globals: g, Output: "table"}
}

// NewCmdStatus is `status NAME`.
func NewCmdStatus(g *Globals) *cobra.Command {
	o := NewStatusOptions(g)
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show the status of a release (what it is doing while pending); --watch follows it until deployed or failed",
		Args:  cobra.ExactArgs(1),
		RunE:  runE(o),
	}
	cmd.Flags().BoolVarP(&o.Watch, "watch", "w", o.Watch, "follow the release until it is deployed or failed (exit 1 on failed)")
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "output format: table, json or yaml")
	return cmd
}

// Complete takes the release name and finds the namespace and submit.
func (o *StatusOptions) Complete(cmd *cobra.Command, args []string) (err error) {
	o.Name = args[0]
	o.target, err = o.findTarget()
	return err
}

// Validate checks the name and the output format.
func (o *StatusOptions) Validate() error {
	if err := requireName(o.Name); err != nil {
		return err
	}
	if err := checkOutput(o.Output); err != nil {
		return err
	}
	return o.validateSubmit()
}

// Run prints the release's status, or with --watch follows it to its end.
func (o *StatusOptions) Run(ctx context.Context) error {
	if err := o.connect(ctx); err != nil {
		return err
	}
	if o.Watch {
		return o.track(o.target, o.Name).toEnd(ctx)
	}
	rel, err := o.submit.Get(ctx, o.ns, o.Name)
	if err != nil {
		return err
	}
	return printReleaseStatus(o.Out, o.Output, rel)
}
