package cli

import (
	"context"

	"github.com/spf13/cobra"
)

// ListOptions are list's flags and what Complete derives from them.
type ListOptions struct {
	named         // no NAME
	AllNamespaces bool
	Output        string
	Query         listQuery
	Print         listPrint
}

// NewCmdList is `list`, with helm list's flags.
func NewCmdList(g *Globals) *cobra.Command {
	o := &ListOptions{named: newNamed(g), Output: "table", Query: listQuery{Max: 256}}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List releases, pending and failed ones included",
		Long: "Without a status flag every release is listed whatever its status (helm's -a): an install or\n" +
			"upgrade stays pending for a while after it is accepted. --deployed, --failed, --pending,\n" +
			"--uninstalling and --uninstalled list only those, as helm's.",
		Args: rangeArgs(0, 0),
		RunE: runE(o),
	}
	f := cmd.Flags()
	q, p := &o.Query, &o.Print
	f.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", o.AllNamespaces, "list releases across all namespaces")
	f.BoolVarP(&q.All, "all", "a", q.All, "show all releases without any filter applied")
	f.BoolVar(&q.Deployed, "deployed", q.Deployed, "show deployed releases")
	f.BoolVar(&q.Failed, "failed", q.Failed, "show failed releases")
	f.BoolVar(&q.Pending, "pending", q.Pending, "show pending releases")
	f.BoolVar(&q.Uninstalling, "uninstalling", q.Uninstalling, "show releases that are currently being uninstalled")
	f.BoolVar(&q.Uninstalled, "uninstalled", q.Uninstalled, "show uninstalled releases (if 'helm uninstall --keep-history' was used)")
	f.StringVarP(&q.Filter, "filter", "f", q.Filter, "a regular expression (Perl compatible). Any releases that match the expression will be included in the results")
	f.BoolVarP(&q.ByDate, "date", "d", q.ByDate, "sort by release date")
	f.BoolVarP(&q.Reverse, "reverse", "r", q.Reverse, "reverse the sort order")
	f.IntVarP(&q.Max, "max", "m", q.Max, "maximum number of releases to fetch")
	f.IntVar(&q.Offset, "offset", q.Offset, "next release index in the list, used to offset from start value")
	f.BoolVarP(&p.Short, "short", "q", p.Short, "output short (quiet) listing format")
	f.BoolVar(&p.NoHeaders, "no-headers", p.NoHeaders, "don't print headers when using the default output format")
	f.StringVar(&p.TimeFormat, "time-format", p.TimeFormat, `format time using golang time formatter. Example: --time-format "2006-01-02 15:04:05Z0700"`)
	addOutputFlag(f, &o.Output)
	return cmd
}

// Complete finds submit and the namespace (none with -A).
func (o *ListOptions) Complete(cmd *cobra.Command, _ []string) (err error) {
	o.target, err = o.findTarget()
	if o.AllNamespaces {
		o.ns = ""
	}
	return err
}

// Validate checks the filter, the window and where the token would go.
func (o *ListOptions) Validate() error {
	_, badQuery := o.Query.compile()
	return firstError(badQuery, refuseIf(o.Query.Offset < 0, "--offset %d: want 0 or more", o.Query.Offset), o.validateSubmit())
}

// Run prints the releases.
func (o *ListOptions) Run(ctx context.Context) error {
	rels, err := o.submit.ListReleases(ctx, o.ns)
	if err != nil {
		return err
	}
	if rels, err = selectReleases(rels, o.Query); err != nil {
		return err
	}
	return writeFormat(o.Out, o.Output, newReleaseList(rels, o.Print))
}
