package cli

import (
	"context"

	"github.com/spf13/cobra"
)

// StatusOptions are status's flags and what Complete derives from them.
type StatusOptions struct {
	named
	Watch  bool
	Output string
	// Revision (helm's --revision): that revision's status; 0 the latest.
	Revision int
	// ShowDesc is helm's --show-desc: the description is always shown (helm v4's status).
	ShowDesc bool
}

// NewCmdStatus is `status NAME`.
func NewCmdStatus(g *Globals) *cobra.Command {
	o := &StatusOptions{named: newNamed(g), Output: "table"}
	cmd := &cobra.Command{
		Use:   "status RELEASE_NAME",
		Short: "Show the status of a release (what it is doing while pending); --watch follows it until deployed or failed",
		Args:  rangeArgs(1, 1),
		RunE:  runE(o),
	}
	f := cmd.Flags()
	f.BoolVarP(&o.Watch, "watch", "w", o.Watch, "follow the release until it is deployed or failed (exit 1 on failed)")
	f.IntVar(&o.Revision, "revision", o.Revision, "if set, display the status of the named release with revision")
	f.BoolVar(&o.ShowDesc, "show-desc", o.ShowDesc, "display the description message of the named release (always shown)")
	addOutputFlag(f, &o.Output)
	return cmd
}

// Validate refuses --watch with --revision.
func (o *StatusOptions) Validate() error {
	return o.check(refuseIf(o.Watch && o.Revision > 0, "--watch follows the latest revision: it takes no --revision"))
}

// Run prints the release's status, or with --watch follows it to its end.
func (o *StatusOptions) Run(ctx context.Context) error {
	if o.Watch {
		return o.track(o.target, o.Name).toEnd(ctx)
	}
	rel, err := fetchRelease(ctx, o.submit, o.ns, o.Name, o.Revision)
	if err != nil {
		return err
	}
	return writeFormat(o.Out, o.Output, newStatusPrinter(*rel, statusShow{Description: true}))
}
