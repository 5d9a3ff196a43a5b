package cli

import (
	"context"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// ListOptions are list's flags and what Complete derives from them.
type ListOptions struct {
	genericiooptions.IOStreams
	*Globals
	AllNamespaces bool
	Output        string

	target
}

// NewListOptions are list's defaults on the shared flags g.
func NewListOptions(g *Globals) *ListOptions {
	return &ListOptions{IOStreams: g.IO, Globals: g, Output: "table"}
}

// NewCmdList is `list`.
func NewCmdList(g *Globals) *cobra.Command {
	o := NewListOptions(g)
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List releases, pending and failed ones included",
		Args:    cobra.NoArgs,
		RunE:    runE(o),
	}
	cmd.Flags().BoolVarP(&o.AllNamespaces, "all-namespaces", "A", o.AllNamespaces, "list releases across all namespaces")
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "output format: table, json or yaml")
	return cmd
}

// Complete finds submit and the namespace (none with -A).
func (o *ListOptions) Complete(cmd *cobra.Command, _ []string) error {
	t, err := o.findTarget()
	if err != nil {
		return err
	}
	o.target = t
	if o.AllNamespaces {
		o.ns = ""
	}
	return nil
}

// Validate checks the output format and where the token would go.
func (o *ListOptions) Validate() error {
	if err := checkOutput(o.Output); err != nil {
		return err
	}
	return o.validateSubmit()
}

// Run prints the releases.
func (o *ListOptions) Run(ctx context.Context) error {
	if err := o.connect(ctx); err != nil {
		return err
	}
	rels, err := o.submit.ListReleases(ctx, o.ns)
	if err != nil {
		return err
	}
	return printReleases(o.Out, o.Output, rels)
}
