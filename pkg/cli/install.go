package cli

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	helmcli "helm.sh/helm/v3/pkg/cli"
	"helm.sh/helm/v3/pkg/cli/values"
	"helm.sh/helm/v3/pkg/getter"
	corev1 "k8s.io/api/core/v1"

	"github.com/async-helm/async-helm/pkg/api"
	"github.com/async-helm/async-helm/pkg/release"
)

// ActionOptions are install's and upgrade's.
type ActionOptions struct {
	*Globals
	action      release.Action
	Name, Chart string
	Version     string
	Values      values.Options
	Timeout     time.Duration
	Atomic      bool
	Description string
	Wait        bool
	WaitForJobs bool
	Output      string
	// Retries and Remediation: see docs/design.md, "Retries and remediation".
	Retries     int
	Remediation string
	Supersede   bool
}

func newInstallCmd(g *Globals) *cobra.Command {
	o := &ActionOptions{Globals: g, action: release.ActionInstall}
	cmd := &cobra.Command{
		Use:   "install NAME CHART",
		Short: "Install a chart; answers at once with the pending release",
		Long:  "CHART is a chart archive URL (https://...), an oci:// reference, or REPO/CHART from the cluster's chart repositories.",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name, o.Chart = args[0], args[1]
			return o.Run(cmd.Context())
		},
	}
	o.addFlags(cmd)
	return cmd
}

func newUpgradeCmd(g *Globals) *cobra.Command {
	o := &ActionOptions{Globals: g, action: release.ActionUpgrade}
	cmd := &cobra.Command{
		Use:   "upgrade NAME [CHART]",
		Short: "Upgrade a release; without CHART the release's chart is reused",
		Args:  cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Name = args[0]
			if len(args) == 2 {
				o.Chart = args[1]
			}
			return o.Run(cmd.Context())
		},
	}
	o.addFlags(cmd)
	cmd.Flags().BoolVar(&o.Supersede, "supersede", false, supersedeUsage)
	return cmd
}

func (o *ActionOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.Version, "version", "", "chart version (default: latest)")
	f.StringSliceVarP(&o.Values.ValueFiles, "values", "f", nil, "values from a YAML file or URL (can repeat)")
	f.StringArrayVar(&o.Values.Values, "set", nil, "set values on the command line (key1=val1,key2=val2)")
	f.StringArrayVar(&o.Values.StringValues, "set-string", nil, "set STRING values on the command line")
	f.StringArrayVar(&o.Values.FileValues, "set-file", nil, "set values from files (key=path)")
	f.StringArrayVar(&o.Values.JSONValues, "set-json", nil, "set JSON values on the command line")
	f.DurationVar(&o.Timeout, "timeout", 5*time.Minute, "time to wait for any individual Kubernetes operation (like Jobs for hooks)")
	f.BoolVar(&o.Atomic, "atomic", false, "roll back (uninstall on install) if the action fails; implies the release waits for its resources")
	f.StringVar(&o.Description, "description", "", "add a custom description")
	f.BoolVar(&o.Wait, "wait", false, "follow the release until it is deployed or failed (exit 1 on failed)")
	f.BoolVar(&o.WaitForJobs, "wait-for-jobs", false, "have the install wait until all Jobs complete")
	f.StringVarP(&o.Output, "output", "o", "table", "output format: table, json or yaml")
	f.IntVar(&o.Retries, "retries", 0, "attempts after a failed action, each a new revision (0 to 10)")
	f.StringVar(&o.Remediation, "remediation", "", "after the last failed attempt: rollback (upgrade) or uninstall")
}

// Validate checks the options before anything is sent.
func (o *ActionOptions) Validate() error {
	if o.action == release.ActionInstall && o.Chart == "" {
		return errors.New("CHART is required")
	}
	return checkOutput(o.Output)
}

// Run sends the request, prints the pending release, and with --wait follows it.
func (o *ActionOptions) Run(ctx context.Context) error {
	if err := o.Validate(); err != nil {
		return err
	}
	vals, err := o.Values.MergeValues(getter.All(helmcli.New()))
	if err != nil {
		return fmt.Errorf("values: %w", err)
	}
	c, err := o.client(ctx)
	if err != nil {
		return err
	}
	url, entry := chartRef(o.Chart)
	req := api.ReleaseRequest{Name: o.Name, Namespace: o.namespace(), ChartURL: url, IndexEntry: entry,
		ChartVersion: o.Version, Values: vals, Timeout: o.Timeout.String(),
		// The release itself waits for its resources when the user asks to wait for it.
		Wait: o.Wait || o.Atomic, WaitForJobs: o.WaitForJobs, Atomic: o.Atomic, Description: o.Description,
		Retries: o.Retries, Remediation: o.Remediation, Supersede: o.Supersede}
	var sec *corev1.Secret
	if o.action == release.ActionInstall {
		sec, err = c.Install(ctx, req)
	} else {
		sec, err = c.Upgrade(ctx, req)
	}
	if err != nil {
		return err
	}
	if err := printAccepted(o.IO.Out, o.Output, sec); err != nil {
		return err
	}
	t := o.track(target{ns: req.Namespace, submit: c}, req.Name)
	switch {
	case !o.Wait:
		return nil
	case o.Retries > 0 || o.Remediation != "": // follow every attempt (attempts.go)
		return t.attempts(ctx, acceptedRevision(sec), req.Remediation)
	}
	return t.toEnd(ctx)
}
