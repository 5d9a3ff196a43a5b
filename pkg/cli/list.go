package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	helmrelease "helm.sh/helm/v3/pkg/release"

	"github.com/async-helm/async-helm/pkg/release"
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
				rels, err := c.List(ctx, ns)
				if err != nil {
					return err
				}
				return printList(g.IO.Out, output, rels)
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
		Short: "Show the status of a release; --watch follows it until deployed or failed",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.with(cmd.Context(), output, func(ctx context.Context, c *submitclient.Client) error {
				if watch {
					return follow(ctx, g, c, g.namespace(), args[0])
				}
				rel, err := c.Get(ctx, g.namespace(), args[0])
				if err != nil {
					return err
				}
				return printStatus(g.IO.Out, output, rel)
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

// ErrFailed is returned (exit 1) when a followed release ends failed.
var ErrFailed = errors.New("release failed")

// follow polls the release until its latest revision is final: a spinner with the elapsed
// time on a terminal, one line per status change otherwise.
func follow(ctx context.Context, g *Globals, c *submitclient.Client, ns, name string) error {
	start := g.Now()
	tty := isTerminal(g.IO.Out)
	spin := []rune("⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏")
	last := ""
	for i := 0; ; i++ {
		rel, err := c.Get(ctx, ns, name)
		if err != nil {
			return err
		}
		st := statusOf(rel)
		elapsed := g.Now().Sub(start).Round(time.Second)
		if !release.IsPending(st) {
			if tty {
				fmt.Fprint(g.IO.Out, "\r\033[K")
			}
			if st == string(helmrelease.StatusDeployed) {
				fmt.Fprintf(g.IO.Out, "%s: deployed, revision %d (%s)\n", name, rel.Version, elapsed)
				return nil
			}
			fmt.Fprintf(g.IO.Out, "%s: %s, revision %d (%s)\n", name, st, rel.Version, elapsed)
			return fmt.Errorf("%w: %s revision %d is %s: %s", ErrFailed, name, rel.Version, st, rel.Info.Description)
		}
		if tty {
			fmt.Fprintf(g.IO.Out, "\r%c %s: %s, revision %d (%s)\033[K", spin[i%len(spin)], name, st, rel.Version, elapsed)
		} else if st != last {
			fmt.Fprintf(g.IO.Out, "%s: %s, revision %d (%s)\n", name, st, rel.Version, elapsed)
		}
		last = st
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(g.PollInterval):
		}
	}
}

func statusOf(r *helmrelease.Release) string {
	if r.Info == nil {
		return "unknown"
	}
	return r.Info.Status.String()
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
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
