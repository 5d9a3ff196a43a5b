package cli

import (
	"context"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// TemplateOptions are `template [NAME] CHART`'s: the chart and values flags of install.
type TemplateOptions struct {
	*ActionOptions
	// IncludeCRDs prints the chart's crds/ too (helm template's --include-crds).
	IncludeCRDs bool
}

// NewCmdTemplate is `template [NAME] CHART`: the chart as submit renders it for an install.
func NewCmdTemplate(g *Globals) *cobra.Command {
	o := &TemplateOptions{ActionOptions: NewActionOptions(g, release.ActionInstall)}
	cmd := &cobra.Command{
		Use:   "template [NAME] CHART",
		Short: "render a chart's templates as an install would, without installing (rendered by submit)",
		Long: "NAME defaults to release-name, as helm's. CHART is a chart archive URL (https://...), an oci://\n" +
			"reference, or REPO/CHART from the cluster's chart repositories; -n is the release's namespace.",
		Args: rangeArgs(1, 2),
		RunE: runE(o),
	}
	o.addValuesFlags(cmd)
	cmd.Flags().BoolVar(&o.IncludeCRDs, "include-crds", false, "include CRDs in the templated output")
	return cmd
}

// Complete takes NAME (release-name when only CHART is given) and CHART.
func (o *TemplateOptions) Complete(cmd *cobra.Command, args []string) error {
	if len(args) == 1 {
		args = []string{"release-name", args[0]}
	}
	return o.ActionOptions.Complete(cmd, args)
}

// Validate is named's, not install's.
func (o *TemplateOptions) Validate() error {
	return o.check()
}

// Run asks submit for the render and prints it.
func (o *TemplateOptions) Run(ctx context.Context) error {
	url, entry := chartRef(o.Chart)
	out, err := o.submit.Template(ctx, api.ReleaseRequest{Name: o.Name, Namespace: o.ns, ChartURL: url, IndexEntry: entry,
		ChartVersion: o.Version, Values: o.vals})
	if err != nil {
		return err
	}
	if !o.IncludeCRDs {
		out = withoutCRDs(out)
	}
	_, err = io.WriteString(o.Out, out)
	return err
}

// withoutCRDs drops the documents of the charts' crds/ directories from a render (helm
// template prints them only with --include-crds): each starts "---", "# Source: PATH".
func withoutCRDs(render string) string {
	var b, doc strings.Builder
	flush := func() {
		lines := strings.SplitN(doc.String(), "\n", 3)
		if len(lines) < 2 || !strings.HasPrefix(lines[1], "# Source: ") || !isCRDSource(strings.TrimPrefix(lines[1], "# Source: ")) {
			b.WriteString(doc.String())
		}
		doc.Reset()
	}
	for _, line := range strings.SplitAfter(render, "\n") {
		if line == "---\n" {
			flush()
		}
		doc.WriteString(line)
	}
	flush()
	return b.String()
}

// isCRDSource is a source path in a crds/ directory of a chart, not under templates/.
func isCRDSource(path string) bool {
	parts := strings.Split(path, "/")
	for i, p := range parts[:len(parts)-1] {
		if p == "templates" {
			return false
		}
		if p == "crds" && (i == 0 || i == 1 || parts[i-2] == "charts") {
			return true
		}
	}
	return false
}
