package cli

import (
	"context"

	"github.com/spf13/cobra"

	"github.com/async-helm/async-helm/pkg/submitclient"
)

func newListCmd(g *Globals) *cobra.Command {
	var all bool
	var output string
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List releases, pending and failed ones included",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return g.with(cmd.Context(), output, func(ctx context.Context, c *submitclient.Client) error {
				ns := g.namespace()
				if all {
					ns = ""
				}
				rels, err := c.ListReleases(ctx, ns)
				if err != nil {
					return err
				}
				return printReleases(g.IO.Out, output, rels)
			})
		},
	}
	cmd.Flags().BoolVarP(&all, "all-namespaces", "A", false, "list releases across all namespaces")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json or yaml")
	return cmd
}

func newStatusCmd(g *Globals) *cobra.Command {
	var watch bool
	var output string
	cmd := &cobra.Command{
		Use:   "status NAME",
		Short: "Show the status of a release (what it is doing while pending); --watch follows it until deployed or failed",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.with(cmd.Context(), output, func(ctx context.Context, c *submitclient.Client) error {
				if watch {
					return g.track(target{ns: g.namespace(), submit: c}, args[0]).toEnd(ctx)
				}
				rel, err := c.Get(ctx, g.namespace(), args[0])
				if err != nil {
					return err
				}
				return printReleaseStatus(g.IO.Out, output, rel)
			})
		},
	}
	cmd.Flags().BoolVarP(&watch, "watch", "w", false, "follow the release until it is deployed or failed (exit 1 on failed)")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json or yaml")
	return cmd
}

func newHistoryCmd(g *Globals) *cobra.Command {
	var output string
	cmd := &cobra.Command{
		Use:   "history NAME",
		Short: "Show every revision of a release",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.with(cmd.Context(), output, func(ctx context.Context, c *submitclient.Client) error {
				rels, err := c.History(ctx, g.namespace(), args[0])
				if err != nil {
					return err
				}
				return printHistory(g.IO.Out, output, rels)
			})
		},
	}
	cmd.Flags().StringVarP(&output, "output", "o", "table", "output format: table, json or yaml")
	return cmd
}

// with checks the output format and finds submit, then runs fn.
func (g *Globals) with(ctx context.Context, output string, fn func(context.Context, *submitclient.Client) error) error {
	if err := checkOutput(output); err != nil {
		return err
	}
	c, err := g.client(ctx)
	if err != nil {
		return err
	}
	return fn(ctx, c)
}
