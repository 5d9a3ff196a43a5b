package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/submitclient"
)

// LogsOptions are logs' flags and what Complete derives from them.
type LogsOptions struct {
	named
	Revision int
	Follow   bool
	Output   string
}

// NewCmdLogs is `logs NAME`.
func NewCmdLogs(g *Globals) *cobra.Command {
	o := &LogsOptions{named: newNamed(g), Output: "table"}
	cmd := &cobra.Command{
		Use:   "logs NAME",
		Short: "Print Helm's log of a release's action (what helm --debug prints); -f follows a running one",
		Long: "The log of the latest action, or of --revision N, as the executor keeps it: bounded (the oldest\n" +
			"lines go first), a line Helm repeats in a row printed once with its count. Values and Secret data\n" +
			"are never in it. Allowed to whoever may read the release.",
		Args: rangeArgs(1, 1),
		RunE: runE(o),
	}
	cmd.Flags().IntVar(&o.Revision, "revision", o.Revision, "the revision whose action's log to print (default: the latest started)")
	cmd.Flags().BoolVarP(&o.Follow, "follow", "f", o.Follow, "print new lines as the action logs them, until it ends")
	addOutputFlag(cmd.Flags(), &o.Output)
	return cmd
}

// Validate refuses what cannot be printed: a negative revision, a followed log as a document.
func (o *LogsOptions) Validate() error {
	return o.check(refuseIf(o.Revision < 0, "--revision %d: want a revision number", o.Revision),
		refuseIf(o.Follow && o.Output != "table", "--follow prints plain lines: it takes no -o %s", o.Output))
}

// Run prints the log, and with --follow polls for new lines until the action ends.
func (o *LogsOptions) Run(ctx context.Context) error {
	l, err := o.first(ctx)
	if err != nil {
		return err
	}
	if o.Output != "table" {
		return encode(o.Out, o.Output, l)
	}
	if l.Dropped > 0 {
		fmt.Fprintf(o.Out, "(%d earlier lines dropped: the log keeps its last lines)\n", l.Dropped)
	}
	last := printLogLines(o.Out, l.Lines, 0)
	for o.Follow && l.Running {
		if err := o.pause(ctx); err != nil {
			return err
		}
		if l, err = o.submit.Log(ctx, o.ns, o.Name, l.Revision, last); err != nil {
			return err
		}
		last = printLogLines(o.Out, l.Lines, last)
	}
	return nil
}

// first reads the log; following, it waits while the revision is queued with no log yet.
func (o *LogsOptions) first(ctx context.Context) (*api.ActionLog, error) {
	for {
		l, err := o.submit.Log(ctx, o.ns, o.Name, o.Revision, 0)
		var apiErr *submitclient.APIError
		if err == nil || !o.Follow || !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound {
			return l, err
		}
		rel, gerr := o.submit.Get(ctx, o.ns, o.Name)
		if gerr != nil || !release.IsPending(statusOf(rel)) || (o.Revision > 0 && rel.Version != o.Revision) {
			return nil, err
		}
		if err := o.pause(ctx); err != nil {
			return nil, err
		}
	}
}

// printLogLines prints the lines after sequence number after, and returns the last printed.
func printLogLines(w io.Writer, lines []api.LogLine, after int64) int64 {
	for _, l := range lines {
		if l.Seq <= after {
			continue
		}
		fmt.Fprintf(w, "%s %s", l.Time.UTC().Format(time.RFC3339), l.Text)
		if l.Repeated > 0 && l.Last != nil {
			fmt.Fprintf(w, " (%d times, the last at %s)", l.Repeated+1, l.Last.UTC().Format(time.RFC3339))
		}
		fmt.Fprintln(w)
		after = l.Seq
	}
	return after
}
