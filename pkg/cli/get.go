package cli

import (
	"context"
	"fmt"
	"io"
	"text/template"

	"github.com/spf13/cobra"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/cli/output"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
	"github.com/async-helm/async-helm/pkg/submitclient"
)

// GetOptions are the flags of get's subcommands and what Complete derives from them.
type GetOptions struct {
	named
	Revision int
	// AllValues (values -a): the values computed with the chart's; Output: values' -o.
	AllValues bool
	Output    string
	// Template (all --template): a Go template over {"Release": the release}.
	Template string
	print    func(w io.Writer, o *GetOptions, rel *api.Release) error
}

// NewCmdGet is `get values|manifest|notes|hooks|all NAME`, as helm's get.
func NewCmdGet(g *Globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "get",
		Short: "download extended information of a named release (values, manifest, notes, hooks, all)",
		Args:  rangeArgs(0, 0),
	}
	for _, sub := range []struct {
		use, short string
		print      func(io.Writer, *GetOptions, *api.Release) error
	}{
		{"values", "download the values file for a named release", printValues},
		{"manifest", "download the manifest for a named release", printManifest},
		{"notes", "download the notes for a named release", printNotes},
		{"hooks", "download all hooks for a named release", printHooks},
		{"all", "download all information for a named release", printAll},
	} {
		o := &GetOptions{named: newNamed(g), Output: "table", print: sub.print}
		c := &cobra.Command{Use: sub.use + " RELEASE_NAME", Short: sub.short, Args: rangeArgs(1, 1), RunE: runE(o)}
		c.Flags().IntVar(&o.Revision, "revision", o.Revision, "get the named release with revision")
		switch sub.use {
		case "values":
			c.Flags().BoolVarP(&o.AllValues, "all", "a", o.AllValues, "dump all (computed) values")
			addOutputFlag(c.Flags(), &o.Output)
		case "all":
			c.Flags().StringVar(&o.Template, "template", o.Template, "go template for formatting the output, eg: {{.Release.Name}}")
		}
		cmd.AddCommand(c)
	}
	return cmd
}

// Validate checks the name and the template.
func (o *GetOptions) Validate() error {
	var badTemplate error
	if o.Template != "" {
		_, badTemplate = template.New("_").Parse(o.Template)
	}
	return o.check(badTemplate)
}

// Run reads the revision and prints the part asked for.
func (o *GetOptions) Run(ctx context.Context) error {
	rel, err := fetchRelease(ctx, o.submit, o.ns, o.Name, o.Revision)
	if err != nil {
		return err
	}
	return o.print(o.Out, o, rel)
}

// fetchRelease is a revision as helm's get and status read it (0: the latest, with its progress).
func fetchRelease(ctx context.Context, c *submitclient.Client, ns, name string, revision int) (*api.Release, error) {
	if revision <= 0 {
		return c.Get(ctx, ns, name)
	}
	rels, err := c.History(ctx, ns, name)
	if err != nil {
		return nil, err
	}
	for _, r := range rels {
		if r.Version == revision {
			return &api.Release{Release: r}, nil
		}
	}
	return nil, fmt.Errorf("%w: revision %d of %s/%s", release.ErrNotFound, revision, ns, name)
}

// valuesWriter is helm's: the values under a heading in the table.
type valuesWriter struct {
	vals      map[string]any
	allValues bool
}

func (v valuesWriter) WriteTable(w io.Writer) error {
	heading := "USER-SUPPLIED VALUES:"
	if v.allValues {
		heading = "COMPUTED VALUES:"
	}
	if _, err := fmt.Fprintln(w, heading); err != nil {
		return err
	}
	return output.EncodeYAML(w, v.vals)
}

func (v valuesWriter) WriteJSON(w io.Writer) error { return output.EncodeJSON(w, v.vals) }

func (v valuesWriter) WriteYAML(w io.Writer) error { return output.EncodeYAML(w, v.vals) }

func printValues(w io.Writer, o *GetOptions, rel *api.Release) error {
	vals := rel.Config
	if o.AllValues {
		computed, err := chartutil.CoalesceValues(rel.Chart, rel.Config)
		if err != nil {
			return fmt.Errorf("computed values of %s: %w", rel.Name, err)
		}
		vals = computed
	}
	return writeFormat(w, o.Output, valuesWriter{vals: vals, allValues: o.AllValues})
}

func printManifest(w io.Writer, _ *GetOptions, rel *api.Release) error {
	_, err := fmt.Fprintln(w, rel.Manifest)
	return err
}

func printNotes(w io.Writer, _ *GetOptions, rel *api.Release) error {
	if rel.Info == nil || len(rel.Info.Notes) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "NOTES:\n%s\n", rel.Info.Notes)
	return err
}

func printHooks(w io.Writer, _ *GetOptions, rel *api.Release) error {
	writeHooks(w, rel.Release)
	return nil
}

// printAll is helm's get all, or the --template over {"Release": the release}.
func printAll(w io.Writer, o *GetOptions, rel *api.Release) error {
	if o.Template != "" {
		t, err := template.New("_").Parse(o.Template)
		if err != nil {
			return err
		}
		return t.Execute(w, map[string]any{"Release": rel.Release})
	}
	all := statusPrinter{rel: api.Release{Release: rel.Release}, show: statusShow{Metadata: true, Debug: true}}
	return all.WriteTable(w)
}
